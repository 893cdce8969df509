"""Engine processes for real: clean env, ready check, SIGTERM, SIGKILL, survivors of the group, early exit."""

from __future__ import annotations

import os
from pathlib import Path

from gco.local.processes.listen import free_port
from gco.processes.launch import EngineProcess, clean_env
from gco.processes.proc import alive, descendants
from tests.functional.bench.conftest import fake_argv


def _env() -> dict[str, str]:
    return clean_env({"PYTHONPATH": None}, os.environ).env


def test_clean_env_keeps_only_the_base_and_the_manifest() -> None:
    launch = clean_env(
        {"A": "1", "HOME": None, "NOT_SET_ANYWHERE_X": None}, {"PATH": "/bin", "HOME": "/h", "SECRET": "s"}
    )
    assert launch.env == {"PATH": "/bin", "HOME": "/h", "A": "1"}
    assert launch.missing == ["NOT_SET_ANYWHERE_X"]


def test_sigterm_stops_the_group(tmp_path: Path) -> None:
    port = free_port()
    engine = EngineProcess(fake_argv(port, "--style", "tgi"), _env(), tmp_path / "engine.log")
    assert engine.wait_ready(f"http://127.0.0.1:{port}/health", 20, 0.05) == "ready"
    report = engine.stop(5)
    assert (report.signal, report.group_gone, report.survivors, report.exit_code) == ("SIGTERM", True, [], 0)
    assert "text_generation_launcher: Args" in (tmp_path / "engine.log").read_text()


def test_ignored_sigterm_escalates_and_survivors_are_found_and_killed(tmp_path: Path) -> None:
    port = free_port()
    engine = EngineProcess(
        fake_argv(port, "--ignore-sigterm", "--leave-child"), _env(), tmp_path / "engine.log"
    )
    assert engine.wait_ready(f"http://127.0.0.1:{port}/health", 20, 0.05) == "ready"
    children = descendants(engine.popen.pid)
    assert children
    report = engine.stop(0.5)
    assert report.signal == "SIGKILL"
    assert report.group_gone
    assert sorted(children) == report.survivors
    assert not any(alive(pid) for pid in report.survivors)


def test_never_ready_times_out_and_early_exit_is_seen(tmp_path: Path) -> None:
    port = free_port()
    engine = EngineProcess(fake_argv(port, "--never-ready"), _env(), tmp_path / "a.log")
    assert engine.wait_ready(f"http://127.0.0.1:{port}/health", 0.5, 0.05) == "timeout"
    assert engine.stop(5).signal == "SIGTERM"
    broken = EngineProcess(fake_argv(port, "--no-such-flag"), _env(), tmp_path / "b.log")
    assert broken.wait_ready(f"http://127.0.0.1:{port}/health", 20, 0.05) == "exited"
    report = broken.stop(5)
    assert report.signal == "exited"
    assert report.exit_code == 2
