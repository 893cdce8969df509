"""Fencing tokens and timestamps: CSPRNG tokens and a strictly increasing UTC clock.

Timestamps are the optimistic-concurrency token of `updated_at`, so one process never issues
the same value twice, and a write that knows the previous value always moves past it.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

TOKEN_PATTERN = re.compile(r"[0-9a-f]{64}")
_ONE_MICROSECOND = timedelta(microseconds=1)


def new_token() -> str:
    """32 random bytes from the OS CSPRNG as 64 lowercase hex characters."""
    return secrets.token_hex(32)


def is_token(value: object) -> bool:
    return isinstance(value, str) and bool(TOKEN_PATTERN.fullmatch(value))


def format_timestamp(moment: datetime) -> str:
    """UTC ISO-8601 with microseconds and a Z suffix; sorts lexicographically by time."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_timestamp(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


class MonotonicClock:
    """A UTC clock whose readings never repeat or go backwards within the process.

    `wall` is injectable for tests; `after(previous)` returns a reading strictly later than
    `previous`, so a write conditioned on `updated_at` always changes it.
    """

    def __init__(self, wall: Callable[[], datetime] | None = None) -> None:
        self._wall = wall or (lambda: datetime.now(UTC))
        self._last = datetime.min.replace(tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> str:
        return self.after(None)

    def after(self, previous: str | None) -> str:
        with self._lock:
            moment = self._wall().astimezone(UTC)
            floor = self._last
            if previous is not None:
                # a legacy value we cannot parse orders nothing
                with contextlib.suppress(ValueError):
                    floor = max(floor, parse_timestamp(previous))
            if moment <= floor:
                moment = floor + _ONE_MICROSECOND
            self._last = moment
            return format_timestamp(moment)
