"""The Service network's relay server: a caller resetting its keep-alive connection is not an error."""

from __future__ import annotations

import socket
import struct
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from gco.local.region.services import serve


def _answer(request: BaseHTTPRequestHandler) -> None:
    request.send_response(200)
    request.send_header("content-length", "2")
    request.end_headers()
    request.wfile.write(b"ok")


def _reset_after_one_request(port: int) -> None:
    """One keep-alive request, then a close with SO_LINGER 0: the kernel sends RST, as nginx does."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        assert client.recv(4096).startswith(b"HTTP/1.1 200")
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_a_reset_connection_prints_no_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    server = serve(_answer, "relay-test")
    handled: list[Any] = []
    original = server.handle_error

    def recorded(request: Any, client_address: Any) -> None:
        handled.append(client_address)
        original(request, client_address)

    server.handle_error = recorded  # type: ignore[method-assign]
    try:
        _reset_after_one_request(server.server_address[1])
        for _ in range(100):  # bounded: the handler thread reads the reset within milliseconds
            if handled:
                break
            time.sleep(0.05)
    finally:
        server.shutdown()
        server.server_close()
    assert handled, "the reset never reached the server"
    assert "Traceback" not in capfd.readouterr().err
