"""Signals reach only processes proven ours: a reused pid is skipped, members that outlive their leader
are stopped one by one by their recorded identity, a group never seen with its leader alive is left
alone, and pid 0 or 1 is never signalled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from gco.processes.identity import Started, record
from gco.processes.proc import alive, group_members
from gco.processes.signals import send, stop_groups

SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]
# A leader that leaves a child in its group: the child ignores SIGTERM, the leader exits on it.
LEADER_WITH_STUBBORN_CHILD = (
    "import signal, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(120)'],\n"
    "    stdout=subprocess.PIPE)\n"
    "child.stdout.readline()\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(120)\n"
)


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts, each killed and reaped after it."""
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def spawn(processes: list[subprocess.Popen[str]], argv: list[str]) -> subprocess.Popen[str]:
    process = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.PIPE, text=True)
    processes.append(process)
    return process


def test_a_reused_pid_is_never_signalled(started: list[subprocess.Popen[str]]) -> None:
    other = spawn(started, SLEEP)
    as_if_reused = record(other.pid).model_copy(update={"start_ticks": record(other.pid).start_ticks + 1})
    assert send(as_if_reused, signal.SIGTERM, group=True) == "reused"
    stop = stop_groups([as_if_reused], timeout_s=0.2)
    assert stop.survivors == [] and [s.pid for s in stop.skipped] == [other.pid]
    assert "now belongs to another process" in stop.skipped[0].why
    assert other.poll() is None  # still running: nothing was sent


def test_pid_0_and_1_are_never_signalled(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[object] = []
    monkeypatch.setattr(os, "killpg", lambda *args: sent.append(args))
    monkeypatch.setattr(signal, "pidfd_send_signal", lambda *args: sent.append(args))
    for pid in (0, 1):
        unchecked = Started.model_construct(pid=pid, start_ticks=0)  # as if a check were bypassed
        assert send(unchecked, signal.SIGTERM, group=True) == "gone"
    assert sent == []


def test_a_recorded_group_is_stopped_whole(started: list[subprocess.Popen[str]]) -> None:
    leader = spawn(started, [sys.executable, "-c", LEADER_WITH_STUBBORN_CHILD])
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    stop = stop_groups([record(leader.pid)], timeout_s=1.0, poll_s=0.02)
    # The leader went on SIGTERM; its child, recorded while the leader lived, was killed by its identity.
    assert stop.survivors == [] and stop.skipped == []
    assert leader.wait(timeout=30) == -signal.SIGTERM
    assert not alive(child) and not group_members(leader.pid)


def test_a_group_whose_leader_exited_unseen_is_left_alone(started: list[subprocess.Popen[str]]) -> None:
    leader = spawn(started, [sys.executable, "-c", LEADER_WITH_STUBBORN_CHILD])
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    recorded = record(leader.pid)
    leader.kill()
    leader.wait(timeout=30)  # the leader is gone: nothing proves the group's other members ours
    try:
        stop = stop_groups([recorded], timeout_s=0.2)
        assert stop.survivors == [] and [s.pid for s in stop.skipped] == [leader.pid]
        assert "cannot prove it started" in stop.skipped[0].why and str(child) in stop.skipped[0].why
        assert alive(child)
    finally:
        os.kill(child, signal.SIGKILL)
