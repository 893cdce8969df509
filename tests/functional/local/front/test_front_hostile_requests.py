"""Malformed and hostile requests at the global address, each sent on a raw socket: every one gets
its defined answer within a bound, the body is never waited for before the key passed, and nothing
is logged as a traceback."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gco.endpoints import parse_spec
from gco.endpoints.record import EndpointRecord
from gco.endpoints.tokens import format_timestamp
from gco.front_door import MAX_REQUEST_BYTES
from gco.global_access import keys
from gco.global_access.keys import ApiKey
from gco.local.front import front as front_module
from gco.local.front.front import GlobalFront
from gco.local.front.server import HEADER_LIMIT_BYTES
from tests.unit.reconcile.records import EAST, IMAGE

LIFE = "l" * 64
ANSWER_S = 3.0  # the longest any refusal here may take
PATH = "/inference/smol/v1/completions"


class Keys:
    def __init__(self, record: ApiKey) -> None:
        self.record = record

    def get(self, key_id: str) -> ApiKey | None:
        return self.record if key_id == self.record.key_id else None


class Records:
    def get(self, name: str, consistent_read: bool = True) -> EndpointRecord | None:
        status = {
            "state": "running",
            "replicas_ready": 1,
            "replicas_desired": 1,
            "last_sync": format_timestamp(datetime.now(UTC)),
            "lifecycle_id": LIFE,
        }
        return EndpointRecord(
            endpoint_name=name,
            lifecycle_id=LIFE,
            desired_state="running",
            target_regions=[EAST],
            spec=parse_spec({"image": IMAGE}),
            region_status={EAST: status},
        )


class Echo(BaseHTTPRequestHandler):
    """A Region's proxy that answers with the length and text of the body it received."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        answer = json.dumps({"length": len(body), "body": body.decode()}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def front() -> Iterator[tuple[GlobalFront, str]]:
    """The global address over one Region whose proxy echoes, and a key that passes."""
    plaintext, record = keys.new_key("tests", ["*"], now=datetime.now(UTC))
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    served = GlobalFront(Records(), Keys(record), {EAST: f"http://127.0.0.1:{upstream.server_address[1]}"})
    try:
        yield served, plaintext
    finally:
        served.stop()
        upstream.shutdown()
        upstream.server_close()


def exchange(
    front: GlobalFront, raw: bytes, timeout: float = ANSWER_S
) -> tuple[http.client.HTTPResponse, bytes]:
    """Send `raw` on a fresh connection; the answer and its body (the socket times out past `timeout`)."""
    port = int(front.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(raw)
        reply = http.client.HTTPResponse(sock)
        reply.begin()
        return reply, reply.read()


def request(head: str, body: bytes = b"") -> bytes:
    return (
        f"POST {PATH} HTTP/1.1\r\nhost: gco\r\ncontent-type: application/json\r\n{head}\r\n"
    ).encode() + body


def error_of(body: bytes) -> dict[str, Any]:
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "code"}  # the OpenAI shape
    return dict(error)


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert all(record.exc_info is None for record in caplog.records), caplog.text
    assert "Traceback" not in caplog.text


@pytest.mark.parametrize("authorization", ["", "authorization: Bearer gco_nope.nope\r\n"])
def test_the_key_is_checked_before_the_body_is_read(
    front: tuple[GlobalFront, str], authorization: str
) -> None:
    served, _ = front
    started = time.monotonic()
    reply, body = exchange(served, request(f"{authorization}content-length: 100\r\n", b"0123456789"))
    assert reply.status == 401 and time.monotonic() - started < ANSWER_S
    assert error_of(body)["type"] == "authentication_error"
    assert reply.getheader("connection") == "close"


def test_a_body_that_stops_arriving_is_answered_408(
    front: tuple[GlobalFront, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    served, key = front
    monkeypatch.setattr(front_module, "BODY_TIMEOUT_S", 1.0)  # the constant is read per request
    started = time.monotonic()
    raw = request(f"authorization: Bearer {key}\r\ncontent-length: 100\r\n", b"0123456789")
    reply, body = exchange(served, raw, timeout=1.0 + ANSWER_S)
    assert reply.status == 408 and 1.0 <= time.monotonic() - started < 1.0 + ANSWER_S
    assert error_of(body)["code"] == "request_timeout" and reply.getheader("connection") == "close"


def test_the_stated_bound_on_a_body_is_ten_seconds() -> None:
    assert front_module.BODY_TIMEOUT_S == 10.0


@pytest.mark.parametrize("length", ["-1", "abc", "1e3", ""])
def test_a_content_length_that_is_not_a_number_is_answered_400(
    front: tuple[GlobalFront, str], length: str, caplog: pytest.LogCaptureFixture
) -> None:
    served, key = front
    caplog.set_level(logging.WARNING)
    reply, _ = exchange(
        served, request(f"authorization: Bearer {key}\r\ncontent-length: {length}\r\n", b"{}")
    )
    assert reply.status == 400
    no_traceback(caplog)


def test_a_chunked_body_is_forwarded_whole(front: tuple[GlobalFront, str]) -> None:
    served, key = front
    chunks = b'5\r\n{"a":\r\n4\r\n "b"\r\n1\r\n}\r\n0\r\n\r\n'
    reply, body = exchange(
        served, request(f"authorization: Bearer {key}\r\ntransfer-encoding: chunked\r\n", chunks)
    )
    assert reply.status == 200 and reply.getheader("x-gco-region") == EAST
    assert json.loads(body) == {"length": 10, "body": '{"a": "b"}'}


def test_two_differing_content_lengths_are_answered_400(
    front: tuple[GlobalFront, str], caplog: pytest.LogCaptureFixture
) -> None:
    served, key = front
    caplog.set_level(logging.WARNING)
    raw = request(f"authorization: Bearer {key}\r\ncontent-length: 2\r\ncontent-length: 4\r\n", b"{}")
    reply, _ = exchange(served, raw)
    assert reply.status == 400
    no_traceback(caplog)


def test_two_authorization_headers_are_answered_400_naming_the_header(front: tuple[GlobalFront, str]) -> None:
    served, key = front
    raw = request(
        f"authorization: Bearer {key}\r\nauthorization: Bearer other\r\ncontent-length: 2\r\n", b"{}"
    )
    reply, body = exchange(served, raw)
    error = error_of(body)
    assert reply.status == 400 and error["code"] == "duplicate_header"
    assert "Authorization" in error["message"]


@pytest.mark.parametrize("whole", [True, False], ids=["whole", "still-arriving"])
def test_headers_over_the_limit_are_answered_431(front: tuple[GlobalFront, str], whole: bool) -> None:
    served, key = front
    head = request(
        f"authorization: Bearer {key}\r\nx-pad: {'a' * HEADER_LIMIT_BYTES}\r\ncontent-length: 2\r\n"
    )
    reply, body = exchange(served, head + b"{}" if whole else head[: HEADER_LIMIT_BYTES + 100])
    assert reply.status == 431 and error_of(body)["code"] == "headers_too_large"


def test_headers_under_the_limit_pass(front: tuple[GlobalFront, str]) -> None:
    served, key = front
    pad = "a" * (HEADER_LIMIT_BYTES - 500)
    reply, _ = exchange(
        served, request(f"authorization: Bearer {key}\r\nx-pad: {pad}\r\ncontent-length: 2\r\n", b"{}")
    )
    assert reply.status == 200


def test_a_body_declared_over_the_limit_is_answered_413_at_once(front: tuple[GlobalFront, str]) -> None:
    served, key = front
    reply, body = exchange(
        served, request(f"authorization: Bearer {key}\r\ncontent-length: {MAX_REQUEST_BYTES + 1}\r\n")
    )
    assert reply.status == 413 and error_of(body)["code"] == "request_too_large"


def test_a_chunked_body_over_the_limit_is_answered_413(
    front: tuple[GlobalFront, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    served, key = front
    monkeypatch.setattr(front_module, "MAX_REQUEST_BYTES", 100)  # a small body to send
    chunks = b"%x\r\n%s\r\n0\r\n\r\n" % (101, b"x" * 101)
    reply, body = exchange(
        served, request(f"authorization: Bearer {key}\r\ntransfer-encoding: chunked\r\n", chunks)
    )
    assert reply.status == 413 and error_of(body)["type"] == "invalid_request_error"
