"""Waiting on a condition by polling, within a time limit, with progress handed to a callback.

The loop knows nothing of terminals: each poll's progress becomes one line (`<what>: done/total
detail`) given to `report` together with whether it is the last one, so the CLI draws a bar on a
terminal (`gco.cli.wait`), the validation matrix logs each change (`changes`), and a test collects
the lines. The clock and the sleep are injected.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from gco.errors import GcoError

T = TypeVar("T")
# A progress line and whether it is the wait's last (the condition held, or the time ran out).
Report = Callable[[str, bool], None]


class WaitTimeoutError(GcoError):
    """The awaited condition did not hold in time; the message says what was still missing."""


@dataclass(frozen=True)
class Progress(Generic[T]):
    """One poll's answer: `done` of `total` parts hold, `finished` ends the wait with `value`."""

    done: int
    total: int
    finished: bool
    detail: str
    value: T


def silent(line: str, last: bool) -> None:
    """A `Report` that shows nothing."""


def changes(emit: Callable[[str], None]) -> Report:
    """A `Report` that emits a line only when it differs from the one before (a log, not a bar)."""
    shown = [""]

    def report(line: str, last: bool) -> None:
        if line != shown[0]:
            emit(line)
            shown[0] = line

    return report


def wait_for(
    poll: Callable[[], Progress[T]],
    *,
    what: str,
    timeout: float,
    interval: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    report: Report = silent,
) -> T:
    """Poll until `finished` and return its value, reporting each poll's progress line.

    Raises:
        WaitTimeoutError: `timeout` seconds passed first; the message names what was pending.
    """
    deadline = clock() + timeout
    while True:
        progress = poll()
        line = f"{what}: {progress.done}/{progress.total} {progress.detail}".rstrip()
        timed_out = not progress.finished and clock() >= deadline
        report(line, progress.finished or timed_out)
        if progress.finished:
            return progress.value
        if timed_out:
            raise WaitTimeoutError(f"timed out after {timeout:g} s waiting for {what}: {progress.detail}")
        sleep(interval)
