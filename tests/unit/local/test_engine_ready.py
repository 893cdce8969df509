"""The walk-through's wait for the CPU engine that the set-up installs beside it: what ends the wait
and what it prints (a stepped clock, no sleeping)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gco.local.errors import SetupError
from gco.local.llama import engine_ready
from gco.local.llama.engine_ready import await_engine, mark


class Steps:
    """A clock that moves only when the wait sleeps; each sleep may run an action (the set-up's side)."""

    def __init__(self, actions: dict[int, object] | None = None) -> None:
        self.now = 100.0
        self.sleeps = 0
        self.actions = actions or {}

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        action = self.actions.get(self.sleeps)
        if callable(action):
            action()


def test_the_wait_ends_when_the_set_up_marks_the_engine_installed(tmp_path: Path) -> None:
    ready, lines = tmp_path / "ready", list[str]()
    steps = Steps({80: lambda: mark(ready, None)})  # 40 s in, at a sleep of 0.5 s
    waited = await_engine(ready, lines.append, clock=steps.clock, sleep=steps.sleep, parent=lambda: 7)
    assert waited == 40.0
    assert lines[0].startswith("  ... waiting for the CPU engine's set-up")
    # a line every 15 s while it waits, and how long it took
    assert lines[1:] == [
        "  ... still waiting for the CPU engine's set-up (15 s)",
        "  ... still waiting for the CPU engine's set-up (30 s)",
        "  ... the CPU engine is installed: waited 40 s",
    ]
    assert not ready.with_name("ready.partial").exists()  # written whole, by a rename


def test_an_engine_installed_already_is_not_waited_for(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    mark(ready, None)
    steps = Steps()
    assert (
        await_engine(ready, list[str]().append, clock=steps.clock, sleep=steps.sleep, parent=lambda: 7) == 0.0
    )
    assert steps.sleeps == 0


def test_a_failed_set_up_ends_the_wait_with_its_reason(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    steps = Steps({3: lambda: mark(ready, "llama.cpp: building failed (exit 1); see build.log")})
    with pytest.raises(SetupError, match=r"^the CPU engine's set-up failed: llama\.cpp: building failed"):
        await_engine(ready, list[str]().append, clock=steps.clock, sleep=steps.sleep, parent=lambda: 7)


def test_the_wait_ends_when_the_set_up_is_gone(tmp_path: Path) -> None:
    parents = iter([7, 7, 7, 1])  # reparented: the set-up that would write the file ended
    steps = Steps()
    with pytest.raises(SetupError, match="the set-up that installs the CPU engine is gone"):
        await_engine(tmp_path / "ready", list[str]().append, clock=steps.clock, sleep=steps.sleep,
                     parent=lambda: next(parents))  # fmt: skip
    assert steps.sleeps == 2


def test_the_wait_is_bounded(tmp_path: Path) -> None:
    steps = Steps()
    with pytest.raises(SetupError, match=r"timed out after 60 s"):
        await_engine(
            tmp_path / "ready",
            list[str]().append,
            clock=steps.clock,
            sleep=steps.sleep,
            parent=lambda: 7,
            timeout_s=60,
        )
    assert steps.now - 100.0 == pytest.approx(60.5)
    assert engine_ready.TIMEOUT_S >= 3600  # far above a first set-up under heavy load (40 minutes)
