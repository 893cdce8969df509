"""An ASGI app served by uvicorn (h11) on a loopback port, in a background thread.

The request line and headers are held to `HEADER_LIMIT_BYTES`, API Gateway's "total combined size of
request line and header values" (10240 bytes, docs.aws.amazon.com/apigateway/latest/developerguide/
api-gateway-execution-service-limits-table.html), answered 431 in the OpenAI error shape whether the
head arrived whole or is still arriving (h11 alone bounds only an incomplete head, which uvicorn
answers 400). Here names count with values, a little stricter than API Gateway. Malformed framing
(`Content-Length: -1` or `abc`, two differing `Content-Length`s, a bad chunk) is h11's: uvicorn
answers 400 and logs one warning line, no traceback.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from gco.front_door import error_body
from gco.local.errors import LocalStackError
from gco.local.processes.listen import LOOPBACK

HEADER_LIMIT_BYTES = 10_240
# An answer still streaming when the server stops is cut after this long (a caller's stream ends).
STOP_GRACE_S = 2
START_TIMEOUT_S = 10.0
HEAD_REFUSAL = error_body(
    f"the request line and headers are larger than {HEADER_LIMIT_BYTES} bytes",
    "invalid_request_error",
    "headers_too_large",
)


def head_size(received: bytes) -> int:
    """The size of the request head in `received` (all of it while the head's end has not arrived)."""
    ends = [at + len(mark) for mark in (b"\r\n\r\n", b"\n\n") if (at := received.find(mark)) >= 0]
    return min(ends) if ends else len(received)


class HeadLimitedH11(H11Protocol):
    """uvicorn's h11 protocol, refusing a request head over `HEADER_LIMIT_BYTES` with 431."""

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return
        # While no request is under way, what arrives is a request head.
        head = self.conn.trailing_data[0] + data if self.conn.their_state is h11.IDLE else b""
        if head_size(head) > HEADER_LIMIT_BYTES:
            self._refuse_head()
            return
        super().data_received(data)

    def _refuse_head(self) -> None:
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(HEAD_REFUSAL)).encode()),
            (b"connection", b"close"),
        ]
        reason = b"Request Header Fields Too Large"
        self.transport.write(self.conn.send(h11.Response(status_code=431, headers=headers, reason=reason)))
        self.transport.write(self.conn.send(h11.Data(data=HEAD_REFUSAL)))
        self.transport.write(self.conn.send(h11.EndOfMessage()))
        self.transport.close()


class LoopbackServer:
    """`app` served on `127.0.0.1:<port>` (0: any free port) until `stop()`; `port` is the bound one.

    Raises:
        OSError: the port cannot be bound.
        LocalStackError: the server did not start serving within `START_TIMEOUT_S`.
    """

    def __init__(self, app: Any, name: str, port: int = 0) -> None:
        # Bound here, so a taken port fails the caller at once and the port is known before serving.
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((LOOPBACK, port))
        except OSError:
            listener.close()
            raise
        config = uvicorn.Config(
            app,
            interface="asgi3",
            loop="asyncio",
            http=HeadLimitedH11,
            ws="none",
            lifespan="on",
            log_config=None,  # the process's logging stays its own; uvicorn's records propagate to it
            log_level="warning",
            access_log=False,
            server_header=False,
            h11_max_incomplete_event_size=HEADER_LIMIT_BYTES,
            timeout_graceful_shutdown=STOP_GRACE_S,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [listener]}, name=name, daemon=True
        )
        self._thread.start()
        self._wait_started(name)
        self.port = int(self._server.servers[0].sockets[0].getsockname()[1])

    def _wait_started(self, name: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise LocalStackError(f"{name}: the server did not start within {START_TIMEOUT_S:.0f} s")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop serving: close the listener, end answers still streaming after `STOP_GRACE_S`."""
        self._server.should_exit = True
        self._thread.join(timeout=STOP_GRACE_S + START_TIMEOUT_S)
