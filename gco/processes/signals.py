"""Signals sent only to processes proven ours, and the stops built on them.

Before every signal, `send` opens a pidfd on the recorded pid (pidfd_open(2)) and reads its start
time from /proc: only when it matches the recorded one is the signal sent, through the pidfd itself
(pidfd_send_signal(2): it reaches that process and no other, even if the pid is reused meanwhile).
A group is signalled with killpg(2) only when its recorded leader is proven alive and still leads it:
a live leader holds its pid, and so its group's id, which no other process can then be given; the
check and the signal are microseconds apart, and Linux hands out pids cyclically (a pid comes back
only after pid_max others). Pid 0, 1 and negative pids never pass: `Started` refuses them.

The members of a group that outlive its leader are signalled one by one, each by its own recorded
identity: they are recorded while the leader is proven alive (a process in that group then is in the
group gco made). A group whose leader has exited and whose members were never recorded is left alone
and reported, never signalled by its id.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from gco.processes.identity import FIRST_STARTED_PID, Started, Verdict, check, reason, running
from gco.processes.proc import group_members, read_stat, table

GRACE_S = 10.0
POLL_S = 0.05


def send(process: Started, sig: signal.Signals, *, group: bool = False) -> Verdict:
    """Send `sig` to `process` (to its whole group with `group`, when it leads one) if it is ours.

    Returns:
        `ours` when sent; `gone` or `reused` (nothing sent) when the pid no longer names it.
    """
    if process.pid < FIRST_STARTED_PID:  # `Started` refuses these; a model built unchecked is refused too
        return "gone"
    try:
        handle = os.pidfd_open(process.pid)
    except ProcessLookupError:
        return "gone"
    try:
        stat = read_stat(process.pid)
        if stat is None:
            return "gone"
        if stat.start_ticks != process.start_ticks:
            return "reused"
        if group and stat.pgid == process.pid:
            os.killpg(process.pid, sig)
        else:
            signal.pidfd_send_signal(handle, sig)
        return "ours"
    except ProcessLookupError:
        return "gone"
    finally:
        os.close(handle)


def members(leader: Started) -> list[Started]:
    """The other live processes of `leader`'s group, recorded now; none unless the leader is ours."""
    if check(leader) != "ours":
        return []
    return [
        Started(pid=stat.pid, start_ticks=stat.start_ticks)
        for stat in table().values()
        if stat.pgid == leader.pid
        and stat.pid != leader.pid
        and stat.pid >= FIRST_STARTED_PID
        and not stat.zombie
    ]


class Skipped(BaseModel):
    """A recorded process that was not signalled, and why."""

    model_config = ConfigDict(frozen=True)

    pid: int
    why: str


class GroupStop(BaseModel):
    """What `stop_groups` did: the groups with a process of ours left after SIGKILL, and what it skipped."""

    model_config = ConfigDict(frozen=True)

    survivors: list[int]
    skipped: list[Skipped]


def _until(check_done: Callable[[], bool], timeout_s: float, poll_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check_done():
            return True
        time.sleep(poll_s)
    return check_done()


def stop_groups(groups: Sequence[Started], timeout_s: float = GRACE_S, poll_s: float = POLL_S) -> GroupStop:
    """SIGTERM each group whose leader is ours, SIGKILL what of it is left after `timeout_s`.

    A group whose leader's pid was reused is skipped; one whose leader has exited has only its
    recorded members signalled (none when it was never seen alive), and is skipped when other
    processes remain in it.
    """
    recorded = {leader: members(leader) for leader in groups}
    skipped: list[Skipped] = []
    for leader in groups:
        verdict = send(leader, signal.SIGTERM, group=True)
        if verdict == "reused":
            skipped.append(Skipped(pid=leader.pid, why=reason(verdict, leader)))
    live = [leader for leader in groups if all(s.pid != leader.pid for s in skipped)]

    def ours_left(leader: Started) -> list[Started]:
        return [p for p in (leader, *recorded[leader]) if running(p)]

    _until(lambda: not any(ours_left(leader) for leader in live), timeout_s, poll_s)
    for leader in live:
        if running(leader):
            send(leader, signal.SIGKILL, group=True)
        for member in recorded[leader]:
            send(member, signal.SIGKILL)
    _until(lambda: not any(ours_left(leader) for leader in live), timeout_s, poll_s)
    survivors = [leader.pid for leader in live if ours_left(leader)]
    for leader in live:
        others = group_members(leader.pid) - {p.pid for p in ours_left(leader)}
        if leader.pid not in survivors and others and not running(leader):
            why = (
                f"its leader {reason('gone', leader).removeprefix('pid ')}; processes {sorted(others)} "
                "remain in its group, which gco cannot prove it started"
            )
            skipped.append(Skipped(pid=leader.pid, why=why))
    return GroupStop(survivors=survivors, skipped=skipped)


def stop_child(process: subprocess.Popen[Any], grace: float = GRACE_S) -> None:
    """Terminate `process` and reap it; kill it when it has not exited within `grace` seconds.

    `process` is the caller's own child: until it is reaped here its pid names it and no other
    process (Popen signals nothing once it has reaped it).
    """
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=grace)
