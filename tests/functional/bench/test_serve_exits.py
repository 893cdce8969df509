"""`gco bench serve` exits as documented: 1 when every timed request failed (its evidence still
written), 2 naming the field for bucket edges that do not increase or a run directory that is a
file or cannot be made; one line on stderr each time, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gco.cli import main
from gco.local.processes.listen import free_port


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "hi"}\n{"prompt": "there"}\n', encoding="utf-8")
    return path


def serve(prompts: Path, *extra: str, base_url: str = "http://127.0.0.1:9") -> list[str]:
    return ["bench", "serve", "--base-url", base_url, "--prompts", str(prompts), "--warmup", "0", *extra]


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


def test_serve_with_every_request_failed_exits_1(
    prompts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens: every request is refused
    run = tmp_path / "run"
    assert main([*serve(prompts, "--run-dir", str(run), "-o", "json", base_url=nobody)]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["result"]["failed"] == 2  # the evidence is written and printed
    assert err.count("\n") == 1 and "every timed request failed (2 of 2)" in err, err
    assert (run / "serve" / "result.json").exists()


@pytest.mark.parametrize("edges", ["5,3", "5,5", "128,512,300"])
def test_bucket_edges_that_do_not_increase_are_bad_input(
    edges: str, prompts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert main([*serve(prompts, "--bucket-edges", edges, "--run-dir", str(run))]) == 2
    assert "--bucket-edges" in one_line(capsys)
    assert not run.exists()


@pytest.mark.parametrize("run_dir", ["/etc/passwd", "/etc/passwd/run", "/proc/self/gco-run"])
def test_serve_into_a_run_dir_that_is_a_file_is_one_line(
    run_dir: str, prompts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*serve(prompts, "--run-dir", run_dir)]) == 2
    assert "--run-dir" in one_line(capsys)


def test_clip_into_a_run_dir_that_is_a_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clips = tmp_path / "clips.jsonl"
    clips.write_text('{"path": "/v1/videos", "body": {}, "shape": "s"}\n', encoding="utf-8")
    argv = ["bench", "clip", "--base-url", "http://127.0.0.1:9", "--clips", str(clips)]
    assert main([*argv, "--run-dir", "/etc/passwd/run"]) == 2
    assert "--run-dir" in one_line(capsys)
