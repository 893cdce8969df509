"""The CLI's output boundary: standard output that is closed, full or a broken pipe is one error.

A command's output goes through `guarded(sys.stdout)` for the whole command. A write or flush that
fails (EPIPE from a pipe whose reader left, ENOSPC from `> /dev/full`, EBADF) and a standard output
closed before gco started (Python then has `sys.stdout` None, and click would drop the output
silently) raise `OutputError`, which `gco.cli.main` prints as one line on stderr, exit 1. The failed
descriptor is pointed at /dev/null so that the interpreter's own last flush at exit fails no more
(Python's documented recipe for SIGPIPE: the `signal` module's "Note on SIGPIPE").
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, TextIO

from gco.errors import GcoError


class OutputError(GcoError):
    """The command's output could not be written: standard output is closed, full or a broken pipe."""


class GuardedOutput:
    """A text stream over `stream` (None: closed) whose write and flush failures are `OutputError`."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    @property
    def stream(self) -> TextIO | None:
        return self._stream

    def write(self, text: str) -> int:
        """Write `text`.

        Raises:
            TypeError: `text` is not a str (as any text stream's write).
            OutputError: standard output is closed, or the write failed.
        """
        if not isinstance(text, str):  # a text stream, as click's probe with b"" must find
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if not text:  # click's probe with "": nothing to write, nothing to fail
            return 0
        if self._stream is None:
            raise OutputError("cannot write the output: standard output is closed")
        try:
            return self._stream.write(text)
        except OSError as error:
            raise self._failed(error) from None

    def flush(self) -> None:
        """Flush what is buffered.

        Raises:
            OutputError: the flush failed (a full device, a broken pipe).
        """
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except OSError as error:
            raise self._failed(error) from None

    def __getattr__(self, name: str) -> Any:
        if self._stream is None:
            raise AttributeError(name)
        return getattr(self._stream, name)

    def _failed(self, error: OSError) -> OutputError:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if self._stream is not None:  # a captured stream (tests) has no descriptor: nothing to do
                descriptor = self._stream.fileno()
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, descriptor)
                os.close(null)
        return OutputError(f"cannot write the output: {error.strerror or error}")
