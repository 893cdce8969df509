"""The local moto server answers over kept connections: each request's whole body read before the
app runs (read or not by the app), chunked bodies and `Expect: 100-continue` answered, a bad body
or an app that raised ends the connection, and the client's `Connection: close` is honoured."""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from werkzeug.serving import WSGIRequestHandler, make_server

from gco.local.errors import RequestBodyError
from gco.local.moto.keep_alive import keep_alive_handler, request_body, response_head
from gco.local.moto.motoserver import MotoServer
from gco.local.processes.listen import LOOPBACK

SEEN: list[dict[str, Any]] = []


def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """Echoes the body (unread when the path is /unread; raises on /raise) and the client's port."""
    path = environ["PATH_INFO"]
    if path == "/raise":
        raise RuntimeError("the app failed")
    if path == "/wrong-length":
        start_response("200 OK", [("Content-Length", "99")])
        return [b"short"]
    body = b"" if path == "/unread" else environ["wsgi.input"].read()
    SEEN.append({"port": environ["REMOTE_PORT"], "body": body, "length": environ.get("CONTENT_LENGTH")})
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"got:", body]


@pytest.fixture
def server() -> Iterator[tuple[str, int]]:
    SEEN.clear()
    handler = keep_alive_handler(WSGIRequestHandler)
    served = make_server(LOOPBACK, 0, app, threaded=True, request_handler=handler)
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield LOOPBACK, served.server_port
    served.shutdown()
    served.server_close()
    thread.join(timeout=5)


def exchange(address: tuple[str, int], *requests: bytes) -> bytes:
    """Send the raw requests on one connection and read until the server closes it (or 2 s pass).

    A server that refuses a request closes the connection at once; with the next request still unread
    it resets it (RST), and a half-close after that fails with ENOTCONN (seen under load): the answer
    already received is still read (Linux hands queued data over before the reset's error)."""
    with socket.create_connection(address, timeout=2) as conn:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # closed after a refusal
            for request in requests:
                conn.sendall(request)
        with contextlib.suppress(OSError):  # closed by the server already: nothing left to half-close
            conn.shutdown(socket.SHUT_WR)
        chunks = []
        with contextlib.suppress(ConnectionResetError):
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)


def test_requests_share_one_connection_and_each_gets_a_length(server: tuple[str, int]) -> None:
    conn = http.client.HTTPConnection(*server, timeout=5)
    answers = []
    for body in (b"one", b"two", b""):
        conn.request("POST", "/", body=body)
        response = conn.getresponse()
        answers.append((response.read(), response.getheader("Content-Length"), response.will_close))
    conn.close()
    assert answers == [(b"got:one", "7", False), (b"got:two", "7", False), (b"got:", "4", False)]
    assert len({seen["port"] for seen in SEEN}) == 1  # one connection for the three


def test_a_body_the_app_does_not_read_is_not_taken_for_the_next_request(server: tuple[str, int]) -> None:
    smuggled = b"GET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n"
    raw = exchange(
        server,
        b"POST /unread HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n%s" % (len(smuggled), smuggled),
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnext",
    )
    assert raw.count(b"HTTP/1.1 200 OK") == 2 and raw.endswith(b"got:next")
    assert [seen["body"] for seen in SEEN] == [b"", b"next"]  # nothing answered for /smuggled


def test_a_chunked_body_reaches_the_app_whole_with_its_length(server: tuple[str, int]) -> None:
    raw = exchange(
        server,
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nConnection: close\r\n\r\nz",
    )
    assert SEEN[0]["body"] == b"abcde" and SEEN[0]["length"] == "5"
    assert raw.count(b"HTTP/1.1 200 OK") == 2 and b"got:abcde" in raw


def test_expect_100_continue_is_answered_before_the_body_is_sent(server: tuple[str, int]) -> None:
    with socket.create_connection(server, timeout=2) as conn:
        conn.sendall(b"PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
        assert conn.recv(4096).startswith(b"HTTP/1.1 100 Continue\r\n")
        conn.sendall(b"data")
        assert b"got:data" in conn.recv(4096)


def test_a_bad_length_is_refused_and_the_connection_closed(server: tuple[str, int]) -> None:
    raw = exchange(
        server,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: ten\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nz",
    )
    assert raw.startswith(b"HTTP/1.1 400 BAD REQUEST\r\n") and b"Connection: close" in raw
    assert raw.count(b"HTTP/1.1 ") == 1 and SEEN == []


def test_an_app_that_raised_answers_500_and_closes(
    server: tuple[str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    raw = exchange(
        server,
        b"GET /raise HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
    )
    assert raw.startswith(b"HTTP/1.1 500 INTERNAL SERVER ERROR\r\n") and raw.count(b"HTTP/1.1 ") == 1
    assert "the app failed" in capsys.readouterr().err


def test_an_answer_whose_length_is_not_its_bodys_closes_the_connection(server: tuple[str, int]) -> None:
    raw = exchange(
        server,
        b"GET /wrong-length HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
    )
    assert raw.count(b"HTTP/1.1 ") == 1 and b"Connection: close" in raw and raw.endswith(b"short")


def test_head_gets_the_length_and_no_body(server: tuple[str, int]) -> None:
    raw = exchange(server, b"HEAD / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"Content-Length: 4" in head and b"Connection: close" in head and body == b""


def test_response_head_adds_a_length_only_where_a_body_may_be() -> None:
    extra = [("Server", "s")]
    empty = response_head("204 NO CONTENT", [], 0, close=False, extra=extra)
    assert empty == b"HTTP/1.1 204 NO CONTENT\r\nServer: s\r\n\r\n"
    given = response_head("200 OK", [("Content-Length", "3")], 3, close=True, extra=[])
    assert given == b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"


def test_a_body_cut_short_is_an_error() -> None:

    with pytest.raises(RequestBodyError, match="closed before"):
        request_body({"CONTENT_LENGTH": "10"}, io.BytesIO(b"short"))
    assert request_body({"CONTENT_LENGTH": "5"}, io.BytesIO(b"exactly and more")) == b"exact"
    assert request_body({}, io.BytesIO(b"ignored")) == b""


def test_the_moto_server_keeps_a_clients_connection() -> None:
    with MotoServer() as moto:
        host, port = moto.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        headers = {
            "X-Amz-Target": "DynamoDB_20120810.ListTables",
            "Content-Type": "application/x-amz-json-1.0",
            "Authorization": "AWS4-HMAC-SHA256 Credential=k/20261205/us-east-1/dynamodb/aws4_request, "
            "SignedHeaders=host, Signature=0",
        }
        sockets = []
        for _ in range(3):
            conn.request("POST", "/", body=b"{}", headers=headers)
            response = conn.getresponse()
            assert response.status == 200 and response.read() == b'{"TableNames": []}'
            assert not response.will_close
            sockets.append(conn.sock)
        conn.close()
        assert sockets[0] is not None and sockets.count(sockets[0]) == 3
