"""An open-loop load level without a coroutine per request: sends from a timer, answers by callback.

A level of several thousand requests at several hundred a second spends the client's one core on
reads; what each request costs besides (a task, its coroutine frames, a timeout scope, a future) is
taken off it here. The next send waits on one loop timer (`loop.call_later`), not a sleeping
coroutine; when it fires, every request already due is written at once, without yielding to the
loop, on an idle connection opened before the level (`Client.start`), and the request after is
encoded while the level waits again. The connection calls back when the answer is whole, cut short
or malformed, and the answer, undecoded, goes to `finished`; a request still unanswered
`timeout_s` after its send is given up on (one loop timer each, cancelled by the answer). A request
that finds no idle connection opens one in a task of its own (`Client.exchange`), which says why
when it cannot. The clock is injected (`clock`); which requests are due is `due`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gco.bench.clients.connection import Connection
from gco.bench.clients.transport import Client, HttpError, Response, Started

NS = 1_000_000_000
# Called once per request: its index, when it was written (ns), and its answer or why there is none.
Finished = Callable[[int, int, Response | None, str | None], None]


def due(offsets: Sequence[float], start: int, elapsed_ns: int) -> int:
    """The index after the last request due by `elapsed_ns` since the level's origin, from `start` on
    (`offsets` in seconds, increasing): the requests `start` up to it are sent now."""
    end = start
    while end < len(offsets) and offsets[end] * NS <= elapsed_ns:
        end += 1
    return end


@dataclass
class _InFlight:
    """One request written and not yet answered: its index, its send, and its give-up timer."""

    index: int
    started: Started | None = None  # set as `Client.start` returns, before any read can call back
    timer: asyncio.TimerHandle | None = None


class OpenLoop:
    """Sends requests `0..len(offsets)-1` at `origin_ns + offsets[i]` seconds; each answer to `finished`.

    Parameters:
        client: the client whose idle connections carry the requests (`Pool.open_ahead` first).
        offsets: planned send times, seconds after `origin_ns`, increasing.
        request: the whole request `i` as it goes on the wire (called once per request, ahead of its time).
        finished: called once per request, sent or not (`Finished`).
        timeout_s: how long after its send a request may wait for its whole answer.
        clock: the monotonic clock, ns (`time.perf_counter_ns`; injected in tests).
    """

    def __init__(
        self,
        client: Client,
        offsets: Sequence[float],
        request: Callable[[int], bytes],
        finished: Finished,
        timeout_s: float,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.client = client
        self.offsets = offsets
        self.request = request
        self.finished = finished
        self.timeout_s = timeout_s
        self.clock = clock
        self.loop = asyncio.get_running_loop()
        self.origin_ns = 0
        self.next = 0
        self.waiting = len(offsets)
        self.encoded = request(0) if offsets else b""
        self.tasks: set[asyncio.Task[None]] = set()
        self.all_done: asyncio.Future[None] = self.loop.create_future()

    async def run(self, origin_ns: int) -> None:
        """Send every request on its schedule from `origin_ns`; return when each has been `finished`."""
        self.origin_ns = origin_ns
        if not self.waiting:
            return
        self.fire()
        await self.all_done

    def fire(self) -> None:
        """Write every request due now, then wait for the next one's time on a loop timer."""
        offsets = self.offsets
        while self.next < len(offsets):
            end = due(offsets, self.next, self.clock() - self.origin_ns)
            if end == self.next:
                break
            for index in range(self.next, end):
                self.send(index, self.encoded)
                self.encoded = self.request(index + 1) if index + 1 < len(offsets) else b""
            self.next = end
        if self.next < len(offsets):
            wait_ns = self.origin_ns + int(offsets[self.next] * NS) - self.clock()
            self.loop.call_later(max(0, wait_ns) / NS, self.fire)

    def send(self, index: int, request: bytes) -> None:
        flight = _InFlight(index)
        started = self.client.start(request, lambda connection: self.answered(flight, connection))
        if started is None:  # no idle connection: open one, in a task of its own
            task = self.loop.create_task(self.exchange(index, request))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            return
        flight.started = started
        flight.timer = self.loop.call_later(self.timeout_s, self.expire, started.connection)

    def answered(self, flight: _InFlight, connection: Connection) -> None:
        del connection  # the flight's own
        if flight.timer is not None:
            flight.timer.cancel()
        started = flight.started
        if started is None:  # cannot happen: a connection calls back from a read, after the write
            return
        try:
            response, error = self.client.ended(started), None
        except HttpError as failure:
            response, error = None, f"HttpError: {failure}"[:300]
        self.done(flight.index, started.sent_ns, response, error)

    def expire(self, connection: Connection) -> None:
        connection.expire(HttpError(f"no whole answer within {self.timeout_s:g} s"))

    async def exchange(self, index: int, request: bytes) -> None:
        sent = self.clock()
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await self.client.exchange(request)
        except (HttpError, TimeoutError) as error:
            self.done(index, sent, None, f"{type(error).__name__}: {error}"[:300])
            return
        self.done(index, response.sent_ns, response, None)

    def done(self, index: int, sent_ns: int, response: Response | None, error: str | None) -> None:
        self.finished(index, sent_ns, response, error)
        self.waiting -= 1
        if not self.waiting and not self.all_done.done():
            self.all_done.set_result(None)
