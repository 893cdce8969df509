"""Waiting on a record with progress on stderr: a bar on a terminal, a line per change otherwise.

The polling loop is `gco.waiting.wait_for`; this module gives it the terminal's way of showing
progress.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TypeVar

import click

from gco.waiting import Progress, Report, WaitTimeoutError, changes
from gco.waiting import wait_for as _wait_for

__all__ = ["Progress", "WaitTimeoutError", "stderr_report", "wait_for"]

T = TypeVar("T")
# The pause between polls when the caller gives none: a name of this module, so that a test replaces
# it here rather than `time.sleep` for the whole process.
pause: Callable[[float], None] = time.sleep


def _to_stderr(line: str) -> None:
    click.echo(line, err=True)


def _bar(line: str, last: bool) -> None:
    """One line redrawn in place; the last one ends it."""
    click.echo(f"\r{line}\x1b[K", nl=last, err=True)


def stderr_report() -> Report:
    """A bar redrawn in place when stderr is a terminal, else a line per change."""
    return _bar if sys.stderr.isatty() else changes(_to_stderr)


def wait_for(
    poll: Callable[[], Progress[T]],
    *,
    what: str,
    timeout: float,
    interval: float = 1.0,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> T:
    """Poll until `finished`, showing done/total on stderr.

    Raises:
        WaitTimeoutError: the time ran out; the message names what is pending.
    """
    return _wait_for(
        poll,
        what=what,
        timeout=timeout,
        interval=interval,
        sleep=sleep or pause,
        clock=clock or time.monotonic,
        report=stderr_report(),
    )
