"""A small HTTP/1.1 client for the load client: keep-alive pool, chunked bodies, SSE.

Written for timing fidelity at high request rates: each connection (`connection.Connection`) is a
non-blocking socket read with `recvmsg` in a pass of the client's poller (`poller.Poller`: every
ready socket in one wake-up of the event loop); each read is stamped with the kernel's receive time
(`rxstamp`), then handed to the incremental parser (`http1.ResponseParser`). The request's caller
wakes once, when the response is whole (`exchange`, `finish`, or the callback given to `start`), or
on each read (`stream`). No JSON is decoded on the timed path. Plain HTTP only (the load client talks
to an engine next to it, or to its proxy).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from gco.bench.clients.connection import Address, Connection
from gco.bench.clients.http1 import Mark, ResponseParser, sse_events
from gco.bench.clients.poller import Poller
from gco.bench.errors import BenchInputError
from gco.bench.errors import HttpError as HttpError  # noqa: PLC0414 (re-exported: callers catch it here)

__all__ = ["Address", "Client", "Connection", "HttpError", "Pool", "Response", "Started", "Target"]

OPEN_BATCH = 64  # connections opened at once by `Pool.open_ahead`


@dataclass(frozen=True)
class Target:
    """Where requests go: host, port and the base path of a base URL."""

    host: str
    port: int
    base_path: str

    @classmethod
    def parse(cls, base_url: str) -> Target:
        """The host, port and path of an `http://` base URL.

        Raises:
            BenchInputError: `--base-url` is not an http:// URL with a host.
        """
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise BenchInputError("--base-url", f"must be an http:// URL, got {base_url!r}")
        return cls(parts.hostname, parts.port or 80, parts.path.rstrip("/"))

    def request(self, method: str, path: str, body: bytes) -> bytes:
        """The whole request as it goes on the wire (encode once, write many times)."""
        head = (
            f"{method} {self.base_path}{path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n"
            f"content-type: application/json\r\naccept: text/event-stream, application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        )
        return head.encode("latin-1") + body


@dataclass(frozen=True)
class Response:
    """A whole response: status, headers, body, and when its bytes came (`sent_ns` on the same clock).

    `marks` are `(body length after a read, perf_counter_ns of that read)`, as `http1.ResponseParser`;
    `kernel_stamps` counts the reads whose time is the kernel's receive stamp (the others: the read's).
    """

    status: int
    headers: dict[str, str]
    body: bytes
    marks: list[Mark]
    sent_ns: int
    ended_ns: int
    kernel_stamps: int = 0


class Pool:
    """Idle keep-alive connections to one target; a connection is reused only after a whole response."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.idle: list[Connection] = []
        self.resolved: Address | None = None
        self._poller: Poller | None = None

    def poller(self) -> Poller:
        """The poller of the running event loop's connections (a new loop gets a new one)."""
        loop = asyncio.get_running_loop()
        if self._poller is None or self._poller.loop is not loop:
            self._poller = Poller(loop)
        return self._poller

    async def address(self) -> Address:
        """The target's address, resolved once (the loop resolves in a worker thread: a hop each time
        would delay every new connection's send).

        Raises:
            OSError: the name did not resolve.
        """
        if self.resolved is None:
            loop = asyncio.get_running_loop()
            infos = await loop.getaddrinfo(self.target.host, self.target.port, type=socket.SOCK_STREAM)
            family, kind, proto, _, address = infos[0]
            self.resolved = (family, kind, proto, address)
        return self.resolved

    def take(self) -> Connection | None:
        """An idle connection that is still open, at once; None when there is none."""
        while self.idle:
            connection = self.idle.pop()
            if not connection.closed:
                return connection
        return None

    async def open_ahead(self, count: int) -> int:
        """Open connections until `count` are idle (a load level's sends then never wait on a
        connect); how many are idle after. A connection that cannot be opened stops it: the request
        that needs one says why.
        """
        while len(self.idle) < count:
            batch = min(OPEN_BATCH, count - len(self.idle))
            try:
                address = await self.address()
            except OSError:
                break
            opened = await asyncio.gather(
                *(Connection.open(address, self.poller()) for _ in range(batch)), return_exceptions=True
            )
            self.idle += [c for c in opened if isinstance(c, Connection)]
            if len(opened) != sum(isinstance(c, Connection) for c in opened):
                break
        return len(self.idle)

    async def acquire(self) -> Connection:
        """An idle connection that is still open, else a new one.

        Raises:
            HttpError: the connection could not be opened.
        """
        idle = self.take()
        if idle is not None:
            return idle
        try:
            return await Connection.open(await self.address(), self.poller())
        except OSError as error:
            raise HttpError(f"connect: {error}") from error

    def release(self, connection: Connection) -> None:
        if connection.reusable:
            self.idle.append(connection)
        else:
            connection.close()

    def close(self) -> None:
        for connection in self.idle:
            connection.close()
        self.idle.clear()
        if self._poller is not None:
            self._poller.close()


@dataclass(frozen=True)
class Started:
    """A request written and not yet answered: its connection, its parser and when it was written."""

    connection: Connection
    parser: ResponseParser
    sent_ns: int


class Client:
    """Send requests to one target; read whole responses, or a stream of SSE `data:` payloads.

    Raises:
        HttpError: from every request: no connection, no or a bad status line, or a body cut short.
    """

    def __init__(self, base_url: str) -> None:
        self.target = Target.parse(base_url)
        self.pool = Pool(self.target)

    async def exchange(self, request: bytes, *, head_only: bool = False) -> Response:
        """Write `request` (as `Target.request` makes it) and wait, without waking per read, for the
        whole response, whatever its status.

        Raises:
            HttpError: connection failure, or a response malformed or cut short.
        """
        connection = await self.pool.acquire()
        parser = ResponseParser(head_only=head_only)
        try:
            sent = connection.send(request, parser, wake_each_read=False)
        except HttpError:
            self.pool.release(connection)
            raise
        return await self.finish(Started(connection, parser, sent))

    def start(self, request: bytes, on_done: Callable[[Connection], None] | None = None) -> Started | None:
        """Write `request` now, on an idle connection, without yielding to the loop (the send is at
        the moment the caller chose); None when no connection is idle or the write failed (then
        `exchange` opens one and says why). With `on_done`, that is called once when the answer is
        whole, cut short or malformed, and the caller then calls `ended` (no `finish`)."""
        connection = self.pool.take()
        if connection is None:
            return None
        parser = ResponseParser()
        try:
            sent = connection.send(request, parser, wake_each_read=False, on_done=on_done)
        except HttpError:
            return None
        return Started(connection, parser, sent)

    def ended(self, started: Started) -> Response:
        """The answer to a request `start` wrote with `on_done`, once that was called; the connection
        goes back to the pool.

        Raises:
            HttpError: the response was malformed, cut short or given up on (`Connection.expire`).
        """
        connection = started.connection
        self.pool.release(connection)
        if connection.error is not None:
            raise connection.error
        return self.response(started)

    @staticmethod
    def response(started: Started) -> Response:
        connection, parser = started.connection, started.parser
        return Response(
            parser.status,
            parser.headers,
            bytes(parser.body),
            parser.marks,
            started.sent_ns,
            parser.ended_ns,
            connection.kernel_stamps,
        )

    async def finish(self, started: Started) -> Response:
        """Wait, without waking per read, for the whole response to a request `start` wrote.

        Raises:
            HttpError: a response malformed or cut short.
        """
        connection = started.connection
        try:
            await connection.wait()
        finally:
            self.pool.release(connection)
        return self.response(started)

    async def get(self, path: str) -> tuple[int, bytes]:
        """GET a path; returns status and body.

        Raises:
            HttpError: connection failure or a body cut short.
        """
        response = await self.exchange(self.target.request("GET", path, b""))
        return response.status, response.body

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """POST JSON already encoded and read the whole response body, whatever its status.

        Raises:
            HttpError: connection failure or a body cut short.
        """
        response = await self.exchange(self.target.request("POST", path, body))
        return response.status, response.body

    async def stream(self, path: str, payload: dict[str, object] | bytes) -> AsyncIterator[bytes]:
        """POST `payload` (a dict, or JSON already encoded); yield each SSE data payload as it arrives.

        `[DONE]` is not yielded. A response that is not an event stream is yielded once, whole.

        Raises:
            HttpError: connection failure, non-2xx status, or a body cut short.
        """
        connection = await self.pool.acquire()
        parser = ResponseParser()
        try:
            body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            connection.send(self.target.request("POST", path, body), parser, wake_each_read=True)
            while not parser.status:
                await connection.wait()
            events = "text/event-stream" in parser.headers.get("content-type", "")
            if parser.status >= 300 or not events:
                while not parser.done:
                    await connection.wait()
                if parser.status >= 300:
                    raise HttpError(f"HTTP {parser.status}: {parser.body[:200].decode('utf-8', 'replace')}")
                yield bytes(parser.body)
                return
            start = 0
            while True:
                done, scanned = parser.done, len(parser.body)
                found, start = sse_events(parser.body, parser.marks, start)
                for _, data in found:
                    if data != b"[DONE]":
                        yield data
                if done:
                    return
                if len(parser.body) == scanned:  # nothing came while the caller held the events
                    await connection.wait()
        finally:
            self.pool.release(connection)

    def close(self) -> None:
        self.pool.close()
