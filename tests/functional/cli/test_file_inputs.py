"""Files named on the command line: YAML read by the 1.2 core schema (as the flags read values), and
no command waits on a FIFO or reads a device: one line, exit 2, nothing written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gco.cli import main
from gco.front_door import MAX_REQUEST_BYTES
from tests.functional.cli.test_hostile_input import IMAGE, Run, run
from tests.unit.validation.sample import settings

__all__ = ["run"]  # the fixture, imported to be used here

DEPLOY = ("inference", "deploy", "chat", "--region", "us-east-1", "--spec")


def spec_file(tmp_path: Path, body: str) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(f"image: {IMAGE}\n{body}\n", encoding="utf-8")
    return str(path)


def test_replicas_010_in_a_spec_file_is_refused_like_the_flag(run: Run, tmp_path: Path) -> None:
    run.refused("'010' at line 2 has a leading zero", *DEPLOY, spec_file(tmp_path, "replicas: 010"))
    run.refused("'--replicas'", "inference", "deploy", "chat", "--image", IMAGE, "--region", "us-east-1",
                "--replicas", "010")  # fmt: skip


def test_replicas_1_30_in_a_spec_file_is_a_string_refused_as_not_an_int(run: Run, tmp_path: Path) -> None:
    err = run.refused("spec.replicas", *DEPLOY, spec_file(tmp_path, "replicas: 1:30"))
    assert "integer" in err


def test_yes_in_a_spec_file_is_a_string(run: Run, tmp_path: Path) -> None:
    status, err = run(*DEPLOY, spec_file(tmp_path, "env:\n  FLAG: yes\n  WHEN: 2026-01-01"))
    assert status == 0, err
    record = run.store.get("chat")
    assert record is not None and record.spec.env == {"FLAG": "yes", "WHEN": "2026-01-01"}


def test_a_fifo_given_as_spec_is_refused_without_blocking(run: Run, tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    run.refused(f"--spec: {fifo} is a FIFO, not a regular file", *DEPLOY, str(fifo))
    run.refused(f"--spec: {fifo} is a FIFO", "inference", "update", "chat", "--spec", str(fifo))


def test_a_fifo_given_as_matrix_settings_is_refused_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "matrix.yaml"
    os.mkfifo(fifo)
    assert main(["matrix", "validate", str(fifo)]) == 2
    assert capsys.readouterr().err == f"error: SETTINGS: {fifo} is a FIFO, not a regular file\n"
    assert main(["matrix", "validate", "/dev/zero"]) == 2
    assert capsys.readouterr().err == "error: SETTINGS: /dev/zero is a character device, not a regular file\n"


def test_matrix_settings_read_yaml_1_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [f"{key}: {json.dumps(value)}" for key, value in settings().items() if key != "gpu_count"]
    path = tmp_path / "matrix.yaml"
    path.write_text("\n".join([*lines, "gpu_count: 1:30"]), encoding="utf-8")
    assert main(["matrix", "validate", str(path)]) == 2
    assert capsys.readouterr().err == "error: gpu_count: must be an integer >= 0\n"


def test_a_fifo_given_as_a_bench_manifest_or_prompts_is_refused_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "manifest.yaml"
    os.mkfifo(fifo)
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n", encoding="utf-8")
    run_dir = str(tmp_path / "run")
    assert (
        main(["bench", "rounds", "--manifest", str(fifo), "--prompts", str(prompts), "--run-dir", run_dir])
        == 2
    )
    assert capsys.readouterr().err == f"error: --manifest: {fifo} is a FIFO, not a regular file\n"
    base = ["bench", "serve", "--base-url", "http://127.0.0.1:9", "--prompts", str(fifo)]
    assert main([*base, "--run-dir", run_dir]) == 2
    assert capsys.readouterr().err == f"error: --prompts: {fifo} is a FIFO, not a regular file\n"


def test_invoke_refuses_a_body_over_the_request_limit_before_any_call(run: Run) -> None:
    prompt = "x" * MAX_REQUEST_BYTES
    run.refused("--prompt: the request body would be", "inference", "invoke", "chat", "--prompt", prompt)
    body = json.dumps({"prompt": prompt})
    err = run.refused("--body: the request body would be", "inference", "invoke", "chat", "--body", body)
    assert f"at most {MAX_REQUEST_BYTES}" in err


def test_a_fifo_given_as_bench_evidence_is_refused_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "evidence.json"
    os.mkfifo(fifo)
    assert main(["bench", "report", str(fifo)]) == 2
    assert capsys.readouterr().err == f"error: EVIDENCE: {fifo} is a FIFO, not a regular file\n"
