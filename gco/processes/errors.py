"""Errors of the process library.

ProcessesError                 (gco.errors.GcoError; exit 1)
└── ProcessGoneError           a process to record has already gone: it cannot be proven ours
"""

from __future__ import annotations

from gco.errors import GcoError


class ProcessesError(GcoError):
    """Root of the process library's errors."""


class ProcessGoneError(ProcessesError):
    """The process to record is gone (or was never there): nothing can prove it was ours."""
