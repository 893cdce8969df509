"""Two `gco local up` on one state directory at once: one starts the stack, the other exits 1
naming the first and starts nothing; `down` then leaves nothing running. A state directory that
cannot be created or written is bad input (exit 2) and nothing starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gco.cli import main
from gco.local.processes import statefiles, statelock
from gco.local.processes.statefiles import RegionChildren
from gco.local.region.node import children_path
from gco.processes.identity import record
from gco.processes.proc import group_members

UP_TIMEOUT_S = 120


def test_concurrent_ups_start_one_stack_and_down_stops_all(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    argv = [
        sys.executable,
        "-m",
        "gco.cli",
        "local",
        "up",
        "--regions",
        "us-east-1",
        "--state-dir",
        str(state_dir),
    ]
    ups = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    results = [(up.wait(timeout=UP_TIMEOUT_S), *up.communicate()) for up in ups]
    try:
        assert sorted(code for code, _, _ in results) == [0, 1], results
        (refused,) = [err for code, _, err in results if code == 1]
        assert refused.count("\n") == 1 and "Traceback" not in refused, refused
        first = next(up for up, (code, _, _) in zip(ups, results, strict=True) if code == 0)
        assert f"(pid {first.pid})" in refused or "already runs" in refused, refused
        started = [process.pid for process in statelock.started(state_dir)]
        state = json.loads((state_dir / "stack.json").read_text())
        assert sorted(started) == sorted(part["pid"] for part in state["parts"])  # one stack's parts only
        children = statefiles.read(children_path(state_dir, "us-east-1"), RegionChildren)
        engines_and_proxies = [group.pid for group in children.groups] if children is not None else []
    finally:
        assert main(["local", "down", "--state-dir", str(state_dir)]) == 0
    assert [pgid for pgid in [*started, *engines_and_proxies] if group_members(pgid)] == []
    assert statelock.started(state_dir) == [] and not (state_dir / "stack.json").exists()


def assert_status_sees_a_stopped_region(state_dir: Path, region_pid: int) -> None:
    """A Region process stopped by SIGSTOP is neither alive nor answering, however its proxy
    answers; `status` says so within its timeouts, and again all is well after SIGCONT."""
    status = [
        sys.executable,
        "-m",
        "gco.cli",
        "local",
        "status",
        "-o",
        "json",
        "--timeout",
        "1",
        "--state-dir",
        str(state_dir),
    ]
    os.killpg(region_pid, signal.SIGSTOP)
    try:
        # Each check is bounded (`--timeout`): status ends by itself; the 120 s only guards the test
        # from a hang, on however loaded a machine, and is no measurement.
        checked = subprocess.run(status, capture_output=True, text=True, timeout=120, check=False)
    finally:
        os.killpg(region_pid, signal.SIGCONT)
    assert checked.returncode == 1 and "not answering: region us-east-1" in checked.stderr, checked
    rows = {row["part"]: row for row in json.loads(checked.stdout)}
    assert rows["region us-east-1"]["alive"] is False and rows["moto"]["answers"] is True
    healthy = subprocess.run(status, capture_output=True, text=True, timeout=60, check=False)
    assert healthy.returncode == 0, healthy


def test_down_stops_what_an_up_started_before_it_recorded_the_stack(tmp_path: Path) -> None:
    """An `up` killed half-way left a process it had started and no `stack.json`."""
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    statelock.record_started(state_dir, record(orphan.pid))
    assert main(["local", "down", "--state-dir", str(state_dir)]) == 0
    assert orphan.wait(timeout=30) != 0 and not group_members(orphan.pid)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write a read-only directory")
def test_a_read_only_state_dir_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    read_only = tmp_path / "ro"
    read_only.mkdir(mode=0o500)
    assert main(["local", "up", "--state-dir", str(read_only)]) == 2
    assert capsys.readouterr().err == f"error: --state-dir: {read_only} is not writable\n"


def test_a_state_dir_that_cannot_be_created_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["local", "up", "--state-dir", str(blocker / "state")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --state-dir: cannot create {blocker / 'state'}: ") and err.count("\n") == 1
