"""`gco local status|env|down` read their state files through models: a corrupt, truncated or hostile
file (pid 1, 0, negative, huge, wrong types, not a regular file) is one line and exit 1 with nothing
signalled; a recorded pid that now names another process is skipped by `down`, which says so, and is
not alive to `status`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gco.cli import main
from gco.local.processes.statefiles import STATE_FILE, Part, StackState
from gco.local.processes.statelock import STARTED_FILE
from gco.local.region.node import children_path
from gco.processes.identity import record

SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]
COMMANDS = (["local", "status", "--timeout", "0.2"], ["local", "env"], ["local", "down"])


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


@pytest.fixture
def no_signals(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every signal gco would send, recorded instead of sent."""
    sent: list[object] = []
    for module, name in ((os, "kill"), (os, "killpg"), (signal, "pidfd_send_signal")):
        monkeypatch.setattr(module, name, lambda *args, _name=name: sent.append((_name, *args)))
    return sent


def sleeper(processes: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(SLEEP, start_new_session=True)
    processes.append(process)
    return process


def part(kind: str, pid: int, ticks: int, region: str | None = None) -> Part:
    return Part.model_validate(
        {
            "kind": kind,
            "region": region,
            "pid": pid,
            "start_ticks": ticks,
            "url": "http://127.0.0.1:9",
            "log": "x.log",
        }
    )


def stack_file(state_dir: Path, parts: list[Part]) -> Path:
    state = StackState(
        endpoint_url="http://127.0.0.1:9",
        table="t",
        home_region="us-east-1",
        regions=["us-east-1"],
        evidence_bucket="b",
        parts=parts,
        invoke_urls={},
    )
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / STATE_FILE).write_text(state.model_dump_json(), encoding="utf-8")
    return state_dir / STATE_FILE


def one_line_error(capsys: pytest.CaptureFixture[str], *, naming: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert naming in err, err
    return err


def hostile_stack(pid: Any) -> dict[str, Any]:
    return {
        "endpoint_url": "http://127.0.0.1:9",
        "table": "t",
        "home_region": "us-east-1",
        "regions": ["us-east-1"],
        "evidence_bucket": "b",
        "parts": [{"kind": "moto", "pid": pid, "start_ticks": 1, "url": "", "log": ""}],
        "invoke_urls": {},
    }


@pytest.mark.parametrize("pid", [1, 0, -1, -4242, 2**40, "4242", True, None, 4242.5], ids=repr)
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[1])
def test_down_never_signals_pid_1(
    pid: Any, command: list[str], tmp_path: Path, no_signals: list[object], capsys: pytest.CaptureFixture[str]
) -> None:
    """pid 1 (as root, `kill(-1)` reached every process), 0 (the caller's own group), negative, huge or
    not an integer: the whole file is refused, naming the field, and nothing is signalled."""
    (tmp_path / STATE_FILE).write_text(json.dumps(hostile_stack(pid)), encoding="utf-8")
    assert main([*command, "--state-dir", str(tmp_path)]) == 1
    one_line_error(capsys, naming="parts.0.pid")
    assert no_signals == []
    assert (tmp_path / STATE_FILE).exists()  # nothing was cleared either


CORRUPT: dict[str, bytes] = {
    "truncated": json.dumps(hostile_stack(4242)).encode()[:60],
    "not json": b"\x00garbage{{",
    "not utf-8": b"\xff\xfe\x00{",
    "empty": b"",
    "a list": b"[]",
    "wrong types": json.dumps({**hostile_stack(4242), "parts": "moto"}).encode(),
    "no start time": json.dumps(
        {**hostile_stack(4242), "parts": [{"kind": "moto", "pid": 4242, "url": "", "log": ""}]}
    ).encode(),
    "unknown kind": json.dumps(
        {
            **hostile_stack(4242),
            "parts": [{"kind": "rm -rf", "pid": 4242, "start_ticks": 1, "url": "", "log": ""}],
        }
    ).encode(),
}


@pytest.mark.parametrize("content", CORRUPT.values(), ids=CORRUPT.keys())
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[1])
def test_corrupt_state_file_is_one_line(
    content: bytes,
    command: list[str],
    tmp_path: Path,
    no_signals: list[object],
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / STATE_FILE).write_bytes(content)
    assert main([*command, "--state-dir", str(tmp_path)]) == 1
    one_line_error(capsys, naming=str(tmp_path / STATE_FILE))
    assert no_signals == []


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[1])
def test_a_state_file_that_is_a_fifo_is_one_line_and_does_not_block(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.mkfifo(tmp_path / STATE_FILE)  # opening it to read would wait for a writer forever
    assert main([*command, "--state-dir", str(tmp_path)]) == 1
    one_line_error(capsys, naming="not a regular file")


@pytest.mark.parametrize(
    ("name", "content"),
    [
        (STARTED_FILE, b'{"pid": 1, "start_ticks": 0}\n'),
        (STARTED_FILE, b"4242\n"),  # an older record: pids without start times cannot be proven
        ("children", b'{"groups": [{"pid": 0, "start_ticks": 1}]}'),
        ("children", b"1\n4242\n"),
    ],
)
def test_a_hostile_started_or_children_file_stops_down_before_any_signal(
    name: str,
    content: bytes,
    tmp_path: Path,
    sleepers: list[subprocess.Popen[bytes]],
    no_signals: list[object],
    capsys: pytest.CaptureFixture[str],
) -> None:
    ours = sleeper(sleepers)
    stack_file(tmp_path, [part("moto", ours.pid, record(ours.pid).start_ticks)])
    path = children_path(tmp_path, "us-east-1") if name == "children" else tmp_path / name
    path.write_bytes(content)
    assert main(["local", "down", "--state-dir", str(tmp_path)]) == 1
    one_line_error(capsys, naming=str(path))
    assert no_signals == [] and ours.poll() is None


def test_down_skips_a_reused_pid(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    """A recorded pid whose process is not the one started (another start time: the pid was reused,
    say after a reboot) is never signalled: `status` shows it not alive, `down` says it skipped it."""
    moto, stranger, engine_stranger = sleeper(sleepers), sleeper(sleepers), sleeper(sleepers)
    reused = record(stranger.pid).start_ticks + 1
    stack_file(
        tmp_path,
        [
            part("moto", moto.pid, record(moto.pid).start_ticks),
            part("region", stranger.pid, reused, "us-east-1"),
        ],
    )
    children = {
        "groups": [{"pid": engine_stranger.pid, "start_ticks": record(engine_stranger.pid).start_ticks + 7}]
    }
    children_path(tmp_path, "us-east-1").write_text(json.dumps(children), encoding="utf-8")
    assert main(["local", "status", "-o", "json", "--timeout", "0.2", "--state-dir", str(tmp_path)]) == 1
    rows = {row["part"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["region us-east-1"]["alive"] is False and rows["moto"]["alive"] is True

    assert main(["local", "down", "--state-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"skipped region us-east-1: pid {stranger.pid} now belongs to another process" in out[0]
    assert f"skipped group {engine_stranger.pid}: pid {engine_stranger.pid} now belongs" in out[1]
    assert out[2] == "stopped moto"
    assert stranger.poll() is None and engine_stranger.poll() is None  # never signalled
    assert moto.wait(timeout=30) == -signal.SIGTERM  # the part proven ours was stopped
    assert not (tmp_path / STATE_FILE).exists()
