"""One keep-alive HTTP/1.1 connection of the load client: a non-blocking socket, read and stamped
as its bytes come, carrying one request at a time.

Each read is a `recvmsg` in a pass of the client's `poller.Poller` (every ready socket in one wake-up
of the event loop), stamped with the kernel's receive time (`rxstamp`: when its last byte reached
the socket, mapped onto `time.perf_counter_ns`), or, where the platform gives none, with
`time.perf_counter_ns` taken first after the read; then it is handed to the incremental parser
(`http1.ResponseParser`). Whoever waits for the answer wakes once, when it is whole (`wait`, or the
`on_done` callback), or on each read (`wake_each_read`, for `Client.stream`).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

from gco.bench.clients import rxstamp
from gco.bench.clients.http1 import ResponseParser
from gco.bench.clients.poller import Poller
from gco.bench.errors import HttpError

Address = tuple[int, int, int, tuple[str, int] | tuple[str, int, int, int]]


class Connection:
    """One keep-alive connection carrying one request at a time: a non-blocking socket that the
    client's poller reads with `recvmsg`, so that each read comes with the kernel's receive stamp
    (`rxstamp`) where the platform gives one."""

    def __init__(self, sock: socket.socket, poller: Poller, *, stamped: bool) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.poller = poller
        self.loop = poller.loop
        self.stamped = stamped
        self.ancillary_bytes = rxstamp.ANCILLARY_BYTES if stamped else 0
        self.parser: ResponseParser | None = None
        self.error: HttpError | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.on_done: Callable[[Connection], None] | None = None
        self.wake_each_read = False
        self.closed = False
        self.sent_ns = 0
        self.kernel_stamps = 0
        self.unsent = b""
        poller.add(self.fd, self._readable)

    @classmethod
    async def open(cls, where: Address, poller: Poller) -> Connection:
        """A new connection to a resolved address (`Pool.address`), receive stamps asked for.

        Raises:
            OSError: the connection was refused.
        """
        family, kind, proto, address = where
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            await poller.loop.sock_connect(sock, address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # each request goes out at once
            stamped = rxstamp.enable(sock)
        except BaseException:
            sock.close()
            raise
        return cls(sock, poller, stamped=stamped)

    def _readable(self, offset: int) -> None:
        """One read, `offset` the realtime-to-monotonic offset of this pass (`rxstamp.offset_ns`)."""
        poller = self.poller
        try:
            size, ancillary, _, _ = self.sock.recvmsg_into(poller.buffers, self.ancillary_bytes)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._lost(error)
            return
        now = time.perf_counter_ns()  # first after the read: the stamp is the read, not the parse
        if not size:
            self._lost(None)
            return
        data = poller.view[:size].tobytes()  # the poller's buffer is the next read's
        if ancillary:
            now, kernel = rxstamp.arrival_at(ancillary, now, self.sent_ns, offset)
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
        done = self.on_done
        if done is not None and (self.error is not None or self.closed or self.answered):
            self.on_done = None
            done(self)

    @property
    def answered(self) -> bool:
        """The answer in flight is whole."""
        return self.parser is not None and self.parser.done

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

    def send(
        self,
        request: bytes,
        parser: ResponseParser,
        *,
        wake_each_read: bool,
        on_done: Callable[[Connection], None] | None = None,
    ) -> int:
        """Write a whole request for `parser` to read the answer; the time it was written (ns).

        What the socket does not take at once is written when it can take more. `on_done`, where
        given, is called once when the answer is whole, cut short or malformed (instead of `wait`).

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
        self.on_done = on_done
        if written < len(request):
            self.unsent = request[written:]
            self.loop.add_writer(self.fd, self._writable)
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
            self.loop.remove_writer(self.fd)

    def expire(self, error: HttpError) -> None:
        """Give up on the answer in flight (its time is up): `error` for whoever waits; closed."""
        if self.error is None:
            self.error = error
        self.close()
        self._wake()

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
        self.poller.remove(self.fd)
        if self.unsent and not self.loop.is_closed():
            self.loop.remove_writer(self.fd)
        self.sock.close()
