"""Many sockets' readiness through one registration with the event loop: one wake-up reads them all.

At a load level's peak the client holds a few hundred connections, each receiving one small chunk
every couple of milliseconds (about 100,000 reads a second at 800 requests/s). The event loop's own
reader callbacks cost a selector key, a ready-queue entry and a handle run per socket per wake-up,
in Python under asyncio's selector loop. Here the connections' sockets are registered with an epoll
instance of their own (`select.epoll`), and only that instance's descriptor with the event loop: an
epoll descriptor is itself readable while any socket in it is (epoll(7): "the epoll file descriptor
itself ... can be monitored by select, poll, or another epoll instance"). So the loop wakes the
client once, and the client reads every ready socket in one pass (`Poller.ready`), with the offset
between the kernel's realtime stamps and the monotonic clock sampled once for the pass
(`rxstamp.offset_ns`). Level-triggered (the default): a socket with bytes left after its read is
reported again by the next pass, and a pass takes at most `BATCH` sockets so that the timers due
(the next request's send) run between passes. Every read goes into one buffer of the poller's
(`buffer`), allocated once.

Where there is no epoll (not Linux), each socket is its own reader on the event loop, as before.
"""

from __future__ import annotations

import asyncio
import select
from collections.abc import Callable

from gco.bench.clients import rxstamp

# The most sockets read in one pass: at most about 1 ms of reads (15-20 us each on the loaded 2-core
# machine), so that a send falling due meanwhile waits no longer (256 let passes run for 5 ms).
BATCH = 64
# The most a read returns: a whole burst of events in one call (asyncio's own default is 64 KiB).
READ_BYTES = 256 * 1024
# A socket's reader: called with the realtime-to-monotonic offset sampled for the pass (ns).
Reader = Callable[[int], None]


class Poller:
    """The read side of one client's connections on one event loop.

    Parameters:
        loop: the running event loop the client's connections live on.
        nested: use one epoll instance for every socket where the platform has it (False: each socket
            its own reader on the loop, as where there is no epoll).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, *, nested: bool = True) -> None:
        self.loop = loop
        self.readers: dict[int, Reader] = {}
        self.epoll = select.epoll() if nested and hasattr(select, "epoll") else None
        self.registered = False
        self.closed = False
        # Every read of the pass lands here first (`recvmsg_into`), and only its bytes are copied out:
        # a fresh 256 KiB buffer per `recvmsg` is above malloc's mmap threshold, a map and an unmap
        # per read (10-20 us a read on the 2-core machine, more than the read itself).
        self.buffer = bytearray(READ_BYTES)
        self.buffers = [self.buffer]
        self.view = memoryview(self.buffer)

    def add(self, fd: int, reader: Reader) -> None:
        """Call `reader` whenever socket `fd` has bytes (or an end, or an error) to read."""
        self.readers[fd] = reader
        if self.epoll is None:
            self.loop.add_reader(fd, self._one, fd)
            return
        self.epoll.register(fd, select.EPOLLIN)
        if not self.registered:
            self.loop.add_reader(self.epoll.fileno(), self.ready)
            self.registered = True

    def remove(self, fd: int) -> None:
        """Stop reading socket `fd` (before it is closed)."""
        if self.readers.pop(fd, None) is None or self.closed or self.loop.is_closed():
            return
        if self.epoll is None:
            self.loop.remove_reader(fd)
        else:
            self.epoll.unregister(fd)

    def ready(self) -> None:
        """One pass: read each socket that has something, at most `BATCH` of them."""
        if self.epoll is None:
            return
        offset = rxstamp.offset_ns()
        readers = self.readers
        for fd, _ in self.epoll.poll(0, BATCH):
            reader = readers.get(fd)
            if reader is not None:
                reader(offset)

    def _one(self, fd: int) -> None:
        reader = self.readers.get(fd)
        if reader is not None:
            reader(rxstamp.offset_ns())

    def close(self) -> None:
        """Unregister from the loop and close the epoll instance (the sockets are their owners' to close)."""
        if self.closed:
            return
        self.closed = True
        if self.epoll is None:
            if not self.loop.is_closed():
                for fd in self.readers:
                    self.loop.remove_reader(fd)
        else:
            if self.registered and not self.loop.is_closed():
                self.loop.remove_reader(self.epoll.fileno())
            self.epoll.close()
        self.readers.clear()
