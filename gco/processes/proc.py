"""What Linux says of a process, read from `/proc/<pid>/stat` (proc(5)).

Reading is harmless: nothing here signals. proc(5) numbers the fields of `/proc/<pid>/stat` from 1:
(2) the command in parentheses (it may itself hold spaces and parentheses, so the fields are read
after the last `)`), (3) state (`Z` zombie, `T`/`t` stopped), (4) ppid, (5) pgrp, (6) session and
(22) starttime, "the time the process started after system boot ... expressed in clock ticks". A pid
is given to a new process only once the old one is gone, so (pid, starttime) names one process for
as long as the machine runs.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

PROC = Path("/proc")
# Linux's PID_MAX_LIMIT on 64-bit machines (2**22, include/linux/threads.h): no pid is larger.
PID_MAX = 4_194_304
# Offsets of the fields after the command: field (n) is at n - 3.
_STATE, _PPID, _PGRP, _SESSION, _STARTTIME = 0, 1, 2, 3, 19


class ProcStat(BaseModel):
    """The fields of one `/proc/<pid>/stat` that gco reads."""

    model_config = ConfigDict(frozen=True)

    pid: int
    state: str
    ppid: int
    pgid: int
    session: int
    start_ticks: int

    @property
    def zombie(self) -> bool:
        return self.state == "Z"

    @property
    def stopped(self) -> bool:
        """Stopped by a signal (SIGSTOP, SIGTSTP) or a tracer."""
        return self.state in ("T", "t")


def parse_stat(pid: int, text: str) -> ProcStat | None:
    """The fields of a `/proc/<pid>/stat` text; None when it is not one (truncated, empty)."""
    fields = text[text.rfind(")") + 2 :].split()
    if ")" not in text or len(fields) <= _STARTTIME:
        return None
    try:
        return ProcStat(
            pid=pid,
            state=fields[_STATE],
            ppid=int(fields[_PPID]),
            pgid=int(fields[_PGRP]),
            session=int(fields[_SESSION]),
            start_ticks=int(fields[_STARTTIME]),
        )
    except ValueError:
        return None


def read_stat(pid: int) -> ProcStat | None:
    """The process `pid` as /proc shows it now; None when there is none (or `pid` is no pid)."""
    if not 0 < pid <= PID_MAX:
        return None
    try:
        text = (PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return parse_stat(pid, text)


def table() -> dict[int, ProcStat]:
    """Every process now, by pid; processes that vanish while read are left out."""
    found: dict[int, ProcStat] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (stat := read_stat(int(entry.name))) is not None:
            found[stat.pid] = stat
    return found


def descendants(pid: int) -> set[int]:
    """Every live descendant of `pid` (children of children included)."""
    processes = table()
    found: set[int] = set()
    frontier = [pid]
    for _ in range(len(processes) + 1):
        if not frontier:
            break
        parent = frontier.pop()
        for child, stat in processes.items():
            if stat.ppid == parent and child not in found:
                found.add(child)
                frontier.append(child)
    return found


def group_members(pgid: int) -> set[int]:
    """The live (non-zombie) processes of process group `pgid`."""
    return {pid for pid, stat in table().items() if stat.pgid == pgid and not stat.zombie}


def alive(pid: int) -> bool:
    """Whether some live (non-zombie) process has pid `pid`, whoever started it (see
    `identity.running` for whether it is the one gco recorded)."""
    stat = read_stat(pid)
    return stat is not None and not stat.zombie


def is_stopped(pid: int) -> bool:
    """Whether `pid` is stopped by a signal (SIGSTOP, SIGTSTP: state `T` in /proc/<pid>/stat)."""
    stat = read_stat(pid)
    return stat is not None and stat.stopped
