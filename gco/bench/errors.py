"""Errors of the benchmark package.

BenchError                 (gco.errors.GcoError)
├── BenchInputError        bad manifest, prompts or option (also GcoInputError: exit 2)
├── GpuLockedError         another run holds the GPU lock file
├── HttpError              a request to an engine failed: connection, non-2xx status, body cut short
└── NothingServedError     every timed request of `bench serve` failed (its evidence is still written)

An engine's misbehaviour (no launch, never ready, crash, survivors) is never an exception here: it is a
cell status and a named limitation of the run.
"""

from __future__ import annotations

from gco.errors import GcoError, GcoInputError


class BenchError(GcoError):
    """Root of the benchmark package's errors."""


class BenchInputError(BenchError, GcoInputError):
    """A manifest, prompt set or option holds a bad value; `field` names it."""

    exit_code = 2

    def __init__(self, field: str, message: str) -> None:
        GcoInputError.__init__(self, field, message)


class GpuLockedError(BenchError):
    """The exclusive GPU lock file is held by another process."""


class HttpError(BenchError):
    """A request failed: connection refused or closed, a non-2xx status, or a body cut short.

    The load client (`transport.py`) converts the socket's errors (`OSError`, `asyncio`'s
    `IncompleteReadError`) into it with `raise ... from`; a request that fails this way is a failed
    request of the cell, counted, never a crash of the run.
    """


class NothingServedError(BenchError):
    """Every timed request of a `bench serve` failed: nothing was measured (exit 1)."""
