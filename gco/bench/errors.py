"""Errors of the benchmark package.

BenchError                 (gco.errors.GcoError)
├── BenchInputError        bad manifest, prompts or option (also GcoInputError: exit 2)
├── GpuLockedError         another run holds the GPU lock file
└── EngineError            an engine could not be launched, readied or stopped
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


class EngineError(BenchError):
    """An engine failed to launch, become ready, or stop."""
