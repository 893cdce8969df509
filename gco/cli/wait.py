"""Waiting on a record with progress on stderr: a bar on a terminal, a line per change otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import click

from gco.errors import GcoError

T = TypeVar("T")
# The pause between polls when the caller gives none: a name of this module, so that a test replaces
# it here rather than `time.sleep` for the whole process.
pause: Callable[[float], None] = time.sleep


class WaitTimeoutError(GcoError):
    """The awaited condition did not hold in time; the message says what was still missing."""


@dataclass(frozen=True)
class Progress(Generic[T]):
    done: int
    total: int
    finished: bool
    detail: str
    value: T


def wait_for(
    poll: Callable[[], Progress[T]],
    *,
    what: str,
    timeout: float,
    interval: float = 1.0,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> T:
    """Poll until `finished`, showing done/total; raise `WaitTimeoutError` naming what is pending."""
    sleep = sleep or pause
    clock = clock or time.monotonic
    deadline = clock() + timeout
    last_line = ""
    interactive = sys.stderr.isatty()
    while True:
        progress = poll()
        line = f"{what}: {progress.done}/{progress.total} {progress.detail}".rstrip()
        if interactive:
            click.echo(f"\r{line}\x1b[K", nl=False, err=True)
        elif line != last_line:
            click.echo(line, err=True)
        last_line = line
        if progress.finished:
            if interactive:
                click.echo("", err=True)
            return progress.value
        if clock() >= deadline:
            if interactive:
                click.echo("", err=True)
            raise WaitTimeoutError(f"timed out after {timeout:g} s waiting for {what}: {progress.detail}")
        sleep(interval)
