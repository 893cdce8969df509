"""Engine-like processes: launched in a clean environment and a group of their own, ready check, stop.

Stop is SIGTERM to the group, SIGKILL after a timeout; the group's members and the descendants that
left it, recorded while the engine ran, are killed one by one, each only while proven ours
(`gco.processes.signals`).
"""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, ConfigDict

from gco.processes.identity import Started, record, running
from gco.processes.proc import descendants, group_members, read_stat
from gco.processes.signals import members, send

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


class StopReport(BaseModel):
    """How an engine's process group was stopped."""

    model_config = ConfigDict(frozen=True)

    signal: Literal["SIGTERM", "SIGKILL", "exited"]
    group_gone: bool
    survivors: list[int]
    exit_code: int | None


class EngineProcess:
    """One launched engine: its Popen, its recorded identity (it leads its own group) and log file."""

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
        # Read while the child is unreaped: its pid cannot name another process yet.
        self.started: Started = record(self.popen.pid)
        self.known: dict[int, Started] = {}

    def exited(self) -> bool:
        return self.popen.poll() is not None

    def _note_descendants(self) -> None:
        """Record the engine's descendants and group members now, while it is proven alive."""
        if not running(self.started):
            return
        for member in members(self.started):
            self.known.setdefault(member.pid, member)
        for pid in descendants(self.popen.pid):
            stat = read_stat(pid)
            if stat is not None and pid not in self.known:
                self.known[pid] = Started(pid=pid, start_ticks=stat.start_ticks)

    def wait_ready(
        self, url: str, timeout_s: float, interval_s: float
    ) -> Literal["ready", "exited", "timeout"]:
        """Poll GET `url` until 2xx (bounded by `timeout_s`); stop early if the engine exits."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.exited():
                return "exited"
            self._note_descendants()
            try:
                with urllib.request.urlopen(url, timeout=max(0.5, interval_s)) as response:  # noqa: S310 - loopback
                    if 200 <= response.status < 300:
                        return "ready"
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(min(interval_s, max(0.0, deadline - time.monotonic())))
        return "timeout"

    def signal(self, sig: signal.Signals) -> None:
        """Send `sig` to the engine alone (not its group), while it has not been reaped."""
        self.popen.send_signal(sig)

    def stop(self, timeout_s: float) -> StopReport:
        """SIGTERM the group, SIGKILL it after `timeout_s`; then kill what of it, and of the
        descendants that left it, outlived the engine, and wait (at most 2 s) until those died."""
        if not self.exited():
            self._note_descendants()
        sent: Literal["SIGTERM", "SIGKILL", "exited"] = "exited" if self.exited() else "SIGTERM"
        send(self.started, signal.SIGTERM, group=True)  # unreaped (a zombie at worst): still ours
        try:
            self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            sent = "SIGKILL"
            send(self.started, signal.SIGKILL, group=True)
        in_group = [p for p in self.known.values() if running(p) and p.pid in group_members(self.pgid)]
        for member in in_group:
            send(member, signal.SIGKILL)
        if in_group and sent != "SIGKILL":
            sent = "SIGKILL"
        self.popen.wait(timeout=GONE_WAIT_S)
        deadline = time.monotonic() + GONE_WAIT_S
        while group_members(self.pgid) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        survivors = sorted((p for p in self.known.values() if running(p)), key=lambda p: p.pid)
        for process in survivors:
            send(process, signal.SIGKILL)
        # SIGKILL is delivered asynchronously: wait (bounded) until each survivor has died, so the
        # report's "killed" holds when the caller reads it.
        deadline = time.monotonic() + GONE_WAIT_S
        while any(running(p) for p in survivors) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        self._log.close()
        return StopReport(
            signal=sent,
            group_gone=not group_members(self.pgid),
            survivors=[p.pid for p in survivors],
            exit_code=self.popen.returncode,
        )
