"""Engine processes: launch in a clean environment and own process group, ready check, stop and sweep.

Stop is SIGTERM to the group, SIGKILL after a timeout; descendants that left the group are found and killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, ConfigDict

BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
POLL_S = 0.05
GONE_WAIT_S = 2.0


class LaunchEnv(BaseModel):
    """The clean environment an engine gets, and the inherited names the caller did not have."""

    model_config = ConfigDict(frozen=True)

    env: dict[str, str]
    missing: list[str]


def clean_env(spec: Mapping[str, str | None], caller: Mapping[str, str]) -> LaunchEnv:
    """A minimal base (PATH, HOME, locale) plus the manifest's env; None values inherit from the caller."""
    env = {name: caller[name] for name in BASE_ENV if name in caller}
    missing = []
    for name, value in spec.items():
        if value is not None:
            env[name] = value
        elif name in caller:
            env[name] = caller[name]
        else:
            missing.append(name)
    return LaunchEnv(env=env, missing=sorted(missing))


def _proc_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, pgid, state) from /proc; processes that vanish while read are skipped."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        table[int(entry.name)] = (int(fields[1]), int(fields[2]), fields[0])
    return table


def descendants(pid: int) -> set[int]:
    """Every live descendant of `pid` (children of children included)."""
    table = _proc_table()
    found: set[int] = set()
    frontier = [pid]
    for _ in range(len(table) + 1):
        if not frontier:
            break
        parent = frontier.pop()
        for child, (ppid, _, _) in table.items():
            if ppid == parent and child not in found:
                found.add(child)
                frontier.append(child)
    return found


def group_members(pgid: int) -> set[int]:
    """Live (non-zombie) processes of a process group."""
    return {pid for pid, (_, group, state) in _proc_table().items() if group == pgid and state != "Z"}


def alive(pid: int) -> bool:
    table = _proc_table()
    return pid in table and table[pid][2] != "Z"


def stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (SIGSTOP, SIGTSTP: state `T` in /proc/PID/stat)."""
    state = _proc_table().get(pid)
    return state is not None and state[2] in ("T", "t")


class StopReport(BaseModel):
    """How an engine's process group was stopped."""

    model_config = ConfigDict(frozen=True)

    signal: Literal["SIGTERM", "SIGKILL", "exited"]
    group_gone: bool
    survivors: list[int]
    exit_code: int | None


class EngineProcess:
    """One launched engine: its Popen, process group and log file."""

    def __init__(self, argv: list[str], env: Mapping[str, str], log_path: Path) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("wb")
        self.popen = subprocess.Popen(
            argv,
            env=dict(env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pgid = self.popen.pid
        self.known: set[int] = set()

    def exited(self) -> bool:
        return self.popen.poll() is not None

    def wait_ready(
        self, url: str, timeout_s: float, interval_s: float
    ) -> Literal["ready", "exited", "timeout"]:
        """Poll GET `url` until 2xx (bounded by `timeout_s`); stop early if the engine exits."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.exited():
                return "exited"
            self.known |= descendants(self.popen.pid)
            try:
                with urllib.request.urlopen(url, timeout=max(0.5, interval_s)) as response:  # noqa: S310 - loopback
                    if 200 <= response.status < 300:
                        return "ready"
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(min(interval_s, max(0.0, deadline - time.monotonic())))
        return "timeout"

    def stop(self, timeout_s: float) -> StopReport:
        """SIGTERM the group, SIGKILL it after `timeout_s`; then kill any descendant that left the group."""
        if not self.exited():
            self.known |= descendants(self.popen.pid)
        sent: Literal["SIGTERM", "SIGKILL", "exited"] = "exited" if self.exited() else "SIGTERM"
        self._signal_group(signal.SIGTERM)
        try:
            self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            sent = "SIGKILL"
        if sent == "SIGKILL" or group_members(self.pgid):
            self._signal_group(signal.SIGKILL)
            if sent != "SIGKILL" and group_members(self.pgid):
                sent = "SIGKILL"
        self.popen.wait(timeout=GONE_WAIT_S)
        deadline = time.monotonic() + GONE_WAIT_S
        while group_members(self.pgid) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        survivors = sorted(pid for pid in self.known if alive(pid))
        for pid in survivors:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._log.close()
        return StopReport(
            signal=sent,
            group_gone=not group_members(self.pgid),
            survivors=survivors,
            exit_code=self.popen.returncode,
        )

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)
