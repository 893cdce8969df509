"""One `gco local up` per state directory at a time, and a record of every process it starts.

`up` holds an exclusive `flock(2)` on `<state-dir>/up.lock` from before it checks for a running
stack until it has written `stack.json` (or stopped what it started). A second `up` on the same
directory meanwhile cannot take the lock and is refused, naming the pid written in the lock file.
The kernel drops the lock when its holder exits, however it exits, so a killed `up` never leaves
the directory locked.

Each process `up` starts is appended to `<state-dir>/started` the moment it is spawned, before
anything waits on it, as its pid and start time (one JSON `Started` a line); `down` stops those
groups as well as the ones `stack.json` records, so an `up` that died half-way, or a `down` run
while an `up` is still starting, leaves nothing running.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from gco.errors import GcoInputError
from gco.local.errors import StackBusyError
from gco.local.processes.statefiles import read_text, refused
from gco.processes.identity import Started

LOCK_FILE = "up.lock"
STARTED_FILE = "started"


def usable(state_dir: Path) -> Path:
    """The state directory, created if needed and writable.

    Raises:
        GcoInputError: on `--state-dir`, when it cannot be created or written.
    """
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise GcoInputError("--state-dir", f"cannot create {state_dir}: {error.strerror or error}") from None
    if not os.access(state_dir, os.W_OK | os.X_OK):
        raise GcoInputError("--state-dir", f"{state_dir} is not writable")
    return state_dir


@contextlib.contextmanager
def holding(state_dir: Path) -> Iterator[None]:
    """Hold the directory's `up` lock for the block.

    Raises:
        GcoInputError: on `--state-dir`, when it cannot be created or written.
        StackBusyError: another process holds it (its pid is named when it wrote one).
    """
    path = usable(state_dir) / LOCK_FILE
    handle = path.open("a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()[:20] or "unknown"
            raise StackBusyError(
                f"another `gco local up` (pid {holder}) is starting the stack from {state_dir}; "
                "wait for it, or `gco local down`"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()  # closing drops the lock


def record_started(state_dir: Path, process: Started) -> None:
    """Append a started process group (its leader as started) to the directory's record."""
    with (state_dir / STARTED_FILE).open("a", encoding="utf-8") as out:
        out.write(process.model_dump_json() + "\n")


def started(state_dir: Path) -> list[Started]:
    """Every process group `up` recorded starting in the directory (oldest first).

    Raises:
        StateFileError: the record is not one gco wrote (a line that is not a `Started`).
    """
    path = state_dir / STARTED_FILE
    text = read_text(path)
    if text is None:
        return []
    try:
        return [Started.model_validate_json(line) for line in text.splitlines() if line.strip()]
    except ValidationError as error:
        raise refused(path, error) from None


def forget_started(state_dir: Path) -> None:
    (state_dir / STARTED_FILE).unlink(missing_ok=True)
