"""A small HTTP/1.1 client on the event loop's reader callbacks: keep-alive pool, chunked bodies, SSE.

Written for timing fidelity at high request rates: each connection is a non-blocking socket read
with `recvmsg` in the loop's reader callback; each read is stamped with the kernel's receive time
(`rxstamp`: when its last byte reached the socket, mapped onto `time.perf_counter_ns`), or, where
the platform gives none, with `time.perf_counter_ns` taken first after the read; then it is handed
to the incremental parser (`http1.ResponseParser`) there. The request's coroutine wakes once, when
the response is whole (`exchange`), or on each read (`stream`). No JSON is decoded on the timed
path. Plain HTTP only (the load client talks to an engine next to it, or to its proxy).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from gco.bench.clients import rxstamp
from gco.bench.clients.http1 import Mark, ResponseParser, sse_events
from gco.bench.errors import BenchInputError
from gco.bench.errors import HttpError as HttpError  # noqa: PLC0414 (re-exported: callers catch it here)

Address = tuple[int, int, int, tuple[str, int] | tuple[str, int, int, int]]
OPEN_BATCH = 64  # connections opened at once by `Pool.open_ahead`
# The most a read returns: a whole burst of events in one call (asyncio's own default is 64 KiB).
READ_BYTES = 256 * 1024


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


class Connection:
    """One keep-alive connection carrying one request at a time: a non-blocking socket that the event
    loop's reader callback reads with `recvmsg`, so that each read comes with the kernel's receive
    stamp (`rxstamp`) where the platform gives one."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop, *, stamped: bool) -> None:
        self.sock = sock
        self.loop = loop
        self.stamped = stamped
        self.ancillary_bytes = rxstamp.ANCILLARY_BYTES if stamped else 0
        self.parser: ResponseParser | None = None
        self.error: HttpError | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.wake_each_read = False
        self.closed = False
        self.sent_ns = 0
        self.kernel_stamps = 0
        self.unsent = b""
        loop.add_reader(sock.fileno(), self._readable)

    @classmethod
    async def open(cls, where: Address) -> Connection:
        """A new connection to a resolved address (`Pool.address`), receive stamps asked for.

        Raises:
            OSError: the connection was refused.
        """
        loop = asyncio.get_running_loop()
        family, kind, proto, address = where
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # each request goes out at once
            stamped = rxstamp.enable(sock)
        except BaseException:
            sock.close()
            raise
        return cls(sock, loop, stamped=stamped)

    def _readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(READ_BYTES, self.ancillary_bytes)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._lost(error)
            return
        now = time.perf_counter_ns()  # first after the read: the stamp is the read, not the parse
        if not data:
            self._lost(None)
            return
        if ancillary:
            now, kernel = rxstamp.arrival_ns(ancillary, now, self.sent_ns)
            self.kernel_stamps += kernel
        self.feed(data, now)

    def feed(self, data: bytes, now: int) -> None:
        """One read's bytes, arrived at `now` (ns), to the parser of the request in flight."""
        parser = self.parser
        if parser is None or parser.done:  # nothing asked for: the connection is not reusable
            self.close()
            return
        try:
            parser.feed(data, now)
        except HttpError as error:
            self.error = error
        if parser.done or self.wake_each_read or self.error is not None:
            self._wake()

    def _lost(self, exc: Exception | None) -> None:
        now = time.perf_counter_ns()
        self.close()
        if self.parser is not None and self.error is None:
            try:
                self.parser.close(now)
            except HttpError as error:
                self.error = HttpError(f"{error}: {exc}" if exc else str(error))
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    @property
    def reusable(self) -> bool:
        parser = self.parser
        return (
            not self.closed
            and self.error is None
            and parser is not None
            and parser.done
            and parser.keep_alive
        )

    def send(self, request: bytes, parser: ResponseParser, *, wake_each_read: bool) -> int:
        """Write a whole request for `parser` to read the answer; the time it was written (ns).

        What the socket does not take at once is written when it can take more.

        Raises:
            HttpError: the connection is closed, or the write failed.
        """
        if self.closed:
            raise HttpError("connection closed")
        self.parser, self.error, self.wake_each_read = parser, None, wake_each_read
        self.kernel_stamps = 0
        sent = self.sent_ns = time.perf_counter_ns()
        try:
            written = self.sock.send(request)
        except (BlockingIOError, InterruptedError):
            written = 0
        except OSError as error:
            self.close()
            raise HttpError(f"send: {error}") from error
        if written < len(request):
            self.unsent = request[written:]
            self.loop.add_writer(self.sock.fileno(), self._writable)
        return sent

    def _writable(self) -> None:
        try:
            written = self.sock.send(self.unsent)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._lost(error)
            return
        self.unsent = self.unsent[written:]
        if not self.unsent:
            self.loop.remove_writer(self.sock.fileno())

    async def wait(self) -> None:
        """Until the next wake-up: a read (when asked for each), the end of the response, or an error.

        Raises:
            HttpError: the response was malformed or cut short.
        """
        parser = self.parser
        if parser is not None and not parser.done and self.error is None and not self.closed:
            self.waiter = self.loop.create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        fd = self.sock.fileno()
        if fd >= 0 and not self.loop.is_closed():
            self.loop.remove_reader(fd)
            self.loop.remove_writer(fd)
        self.sock.close()


class Pool:
    """Idle keep-alive connections to one target; a connection is reused only after a whole response."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.idle: list[Connection] = []
        self.resolved: Address | None = None

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
                *(Connection.open(address) for _ in range(batch)), return_exceptions=True
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
            return await Connection.open(await self.address())
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

    def start(self, request: bytes) -> Started | None:
        """Write `request` now, on an idle connection, without yielding to the loop (the send is at
        the moment the caller chose); None when no connection is idle or the write failed (then
        `exchange` opens one and says why)."""
        connection = self.pool.take()
        if connection is None:
            return None
        parser = ResponseParser()
        try:
            sent = connection.send(request, parser, wake_each_read=False)
        except HttpError:
            return None
        return Started(connection, parser, sent)

    async def finish(self, started: Started) -> Response:
        """Wait, without waking per read, for the whole response to a request `start` wrote.

        Raises:
            HttpError: a response malformed or cut short.
        """
        connection, parser, sent = started.connection, started.parser, started.sent_ns
        try:
            await connection.wait()
        finally:
            self.pool.release(connection)
        return Response(
            parser.status,
            parser.headers,
            bytes(parser.body),
            parser.marks,
            sent,
            parser.ended_ns,
            connection.kernel_stamps,
        )

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
