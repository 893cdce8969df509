"""A process gco started, and the check that a pid still names it.

`record` is called right after a process is spawned, while it is still the caller's unreaped child
(its pid cannot be given to another process before the caller reaps it): it reads the start time the
kernel gave the process. Whatever later reads a pid back from a file (`stack.json`, a Region's
`.children`) holds a `Started` and asks `check` before anything is sent to it: the pid names the same
process only while /proc shows the same start time.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gco.processes.errors import ProcessGoneError
from gco.processes.proc import PID_MAX, read_stat

# Pid 1 is init (as root, kill(-1) signals every process), 0 the caller's own group, negative pids
# whole groups (kill(2)): none of them is ever a process gco started.
FIRST_STARTED_PID = 2

Verdict = Literal["ours", "gone", "reused"]


class Started(BaseModel):
    """A process gco started: its pid and its start time in clock ticks after boot (proc(5) field 22).

    Strict: a pid that is not an integer from 2 to Linux's PID_MAX_LIMIT, or a start time that is
    not a non-negative integer, is refused, however a file spells it.
    """

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    pid: int = Field(ge=FIRST_STARTED_PID, le=PID_MAX)
    start_ticks: int = Field(ge=0)


def record(pid: int) -> Started:
    """The identity of process `pid`, read now (call it while `pid` is the caller's unreaped child).

    Raises:
        ProcessGoneError: /proc shows no process `pid`.
    """
    stat = read_stat(pid)
    if stat is None:
        raise ProcessGoneError(f"process {pid} is gone: it cannot be recorded")
    return Started(pid=pid, start_ticks=stat.start_ticks)


def check(process: Started) -> Verdict:
    """`ours` while the pid names the recorded process (a zombie included), `gone` when no process
    has the pid, `reused` when another process has it now (its start time differs)."""
    stat = read_stat(process.pid)
    if stat is None:
        return "gone"
    return "ours" if stat.start_ticks == process.start_ticks else "reused"


def running(process: Started) -> bool:
    """Whether the recorded process lives: ours, and not a zombie."""
    stat = read_stat(process.pid)
    return stat is not None and stat.start_ticks == process.start_ticks and not stat.zombie


def reason(verdict: Verdict, process: Started) -> str:
    """Why `process` is not signalled, in words, for a verdict other than `ours`."""
    if verdict == "reused":
        return (
            f"pid {process.pid} now belongs to another process (its start time differs from the one recorded)"
        )
    return f"pid {process.pid} has exited"
