"""The local moto server's connections kept open between requests (HTTP/1.1 keep-alive).

werkzeug's development server, which moto's server runs on, ends every response with
`Connection: close` (its `run_wsgi`: `http.server` cannot drain an unread request body before the
next request line), so each call of each client opened a connection, and the server started a
thread for it (`ThreadingMixIn`), drained the socket with a selector and closed it. Measured on this
project's machines, a ListTables costs the server about 1.1 ms of CPU over HTTP against 0.33 ms for
the same WSGI call made in-process: most of a small call's cost was the connection, and DynamoDB's
own endpoints keep connections open (botocore's clients pool them). So `keep_alive_handler` answers
over the same connection until the client closes it or `IDLE_TIMEOUT_S` passes without a request:
it reads the whole request body before the app runs (so nothing unread is left ahead of the next
request line, which is what werkzeug could not promise), answers with a `Content-Length` (and closes
the connection after an answer whose own `Content-Length` is not its body's), and keeps
werkzeug's environ (`make_environ`, moto's underscore headers included), its dechunked request
bodies and `http.server`'s `Expect: 100-continue` answer.

Not modelled: pipelined requests are answered in order, as `http.server` reads them (no client of
the local stack pipelines); a response is written whole, not streamed (the local stack's responses
are small, and moto builds each one whole).
"""

from __future__ import annotations

import io
import logging
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from gco.local.errors import RequestBodyError
from gco.local.processes.headers import http_date

log = logging.getLogger(__name__)
IDLE_TIMEOUT_S = 120.0  # a kept connection with no request this long is closed (clients re-open one)
NO_BODY_STATUSES = frozenset({204, 304})  # with 1xx: never a body, never a Content-Length (RFC 9110 8.6)
StartResponse = Callable[..., Any]


def request_body(environ: dict[str, Any], rfile: io.BufferedIOBase) -> bytes:
    """The whole body of the request `environ` describes, read from the connection `rfile`: its
    `Content-Length` bytes, or a chunked body to its end (werkzeug's `DechunkedInput`, already in
    `wsgi.input` when `wsgi.input_terminated` is set).

    Raises:
        RequestBodyError: a `Content-Length` that is not a number of bytes, or a body cut short.
    """
    if environ.get("wsgi.input_terminated"):
        body: bytes = environ["wsgi.input"].read()
        return body
    declared = str(environ.get("CONTENT_LENGTH") or "0").strip()
    if not declared.isdigit():
        raise RequestBodyError(f"Content-Length {declared!r} is not a number of bytes")
    wanted = int(declared)
    parts: list[bytes] = []
    while wanted:
        part = rfile.read(wanted)
        if not part:
            raise RequestBodyError("the connection closed before the request body ended")
        parts.append(part)
        wanted -= len(part)
    return b"".join(parts)


def with_body(environ: dict[str, Any], body: bytes) -> dict[str, Any]:
    """`environ` reading `body` (already off the connection) as a body of known length."""
    environ.pop("wsgi.input_terminated", None)
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    return environ


def response_head(
    status: str, headers: list[tuple[str, str]], length: int, *, close: bool, extra: list[tuple[str, str]]
) -> bytes:
    """The status line and headers of a whole response of `length` body bytes: the app's headers,
    `extra` (the server's own) first, a `Content-Length` where the app gave none and the status
    may have a body, and `Connection: close` when the connection ends after it."""
    code = int(status.split(None, 1)[0])
    lines = [f"HTTP/1.1 {status}", *(f"{key}: {value}" for key, value in (*extra, *headers))]
    names = {key.lower() for key, _ in headers}
    if "content-length" not in names and code >= 200 and code not in NO_BODY_STATUSES:
        lines.append(f"Content-Length: {length}")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def answer(app: WsgiApp, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    """The app's whole answer to `environ`: status, headers and body (a 500 with no body when the app
    raised, its traceback on stderr as werkzeug logs it)."""
    started: list[Any] = []

    def start_response(
        status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], None]:
        started[:] = [status, list(headers)]
        return _no_write

    try:
        chunks = app(environ, start_response)
        try:
            body = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
    except Exception:  # as werkzeug answers an app that raised: a 500, the traceback logged
        traceback.print_exc(file=sys.stderr)
        return "500 INTERNAL SERVER ERROR", [("Content-Type", "text/plain")], b""
    if not started:
        return "500 INTERNAL SERVER ERROR", [("Content-Type", "text/plain")], b""
    return started[0], started[1], body


def length_agrees(headers: list[tuple[str, str]], content: bytes, method: str) -> bool:
    """Whether the app's own `Content-Length` (if any) is the body's: a client of a kept connection
    would read the next answer from the wrong place otherwise. A HEAD answer's is the GET's."""
    declared = [value.strip() for key, value in headers if key.lower() == "content-length"]
    return method == "HEAD" or all(value == str(len(content)) for value in declared)


def _no_write(data: bytes) -> None:
    raise RuntimeError("the local moto server takes a response body from the app's iterable, not write()")


def keep_alive_handler(base: type[Any]) -> type[Any]:
    """`base` (werkzeug's `WSGIRequestHandler` or moto's subclass of it) answering over kept
    connections, and without a log line per request."""

    class KeepAliveHandler(base):  # type: ignore[misc]  # werkzeug's handler, untyped here
        protocol_version = "HTTP/1.1"
        timeout = IDLE_TIMEOUT_S

        def run_wsgi(self) -> None:
            environ = self.make_environ()
            try:
                body = request_body(environ, self.rfile)
            except (RequestBodyError, OSError) as bad:
                log.info("request body unreadable: %s", bad)
                self.close_connection = True
                head = response_head("400 BAD REQUEST", [], 0, close=True, extra=self._server_headers())
                self.wfile.write(head)
                return
            status, headers, content = answer(self.server.app, with_body(environ, body))
            if status.startswith("500") or not length_agrees(headers, content, self.command):
                self.close_connection = True  # the client reads to the end: nothing follows on it
            head = response_head(
                status, headers, len(content), close=self.close_connection, extra=self._server_headers()
            )
            self.wfile.write(head if self.command == "HEAD" else head + content)

        def _server_headers(self) -> list[tuple[str, str]]:
            return [("Server", self.version_string()), ("Date", http_date())]

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            return None

    return KeepAliveHandler
