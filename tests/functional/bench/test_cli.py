"""The `gco bench` commands through the CLI entry point: serve, report, and bad input exiting 2."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gco.bench.rounds.lock import GpuLock
from gco.cli import main
from gco.local.processes.listen import free_port
from tests.functional.bench.conftest import fake_argv


@pytest.fixture(scope="module")
def engine_url() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        fake_argv(port, "--itl-ms", "0.5"), stdout=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=1):  # noqa: S310 - loopback http
                    break
            except OSError:
                # Never yield an engine that is not serving: a dead or silent one fails here, named.
                assert process.poll() is None, f"the fake engine exited with {process.returncode}"
                assert time.monotonic() < deadline, f"the fake engine at {url} never answered /health"
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"question {i} about things"}) + "\n" for i in range(3)))
    return path


def test_serve_writes_result_requests_and_evidence(
    engine_url: str, prompts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    code = main(
        [
            "bench",
            "serve",
            "--base-url",
            engine_url,
            "--prompts",
            str(prompts),
            "--run-dir",
            str(run),
            "--max-tokens",
            "4",
            "--extra-body",
            '{"ignore_eos": true}',
            "--output",
            "json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    evidence = json.loads(Path(out["evidence"]).read_text())
    assert evidence["kind"] == "bench.serve"
    assert evidence["claim_class"] == "observed"
    assert Path(out["evidence"]).name == f"{evidence['id']}.json"
    assert {a["role"] for a in evidence["artifacts"]} == {"result", "requests"}
    assert "extra_request_body" in {item["code"] for item in evidence["limitations"]}
    assert len((run / "serve" / "requests.jsonl").read_text().splitlines()) == 3
    assert main(["bench", "report", str(run)]) == 0
    html = tmp_path / "r.html"
    assert main(["bench", "report", out["evidence"], "--html", str(html)]) == 0
    assert "<svg" in html.read_text() or "<table" in html.read_text()
    assert evidence["summary"] in capsys.readouterr().out


def test_serve_load_mode_table_output(
    engine_url: str, prompts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "bench",
            "serve",
            "--base-url",
            engine_url,
            "--prompts",
            str(prompts),
            "--mode",
            "load",
            "--levels",
            "1,2",
            "--requests-per-level",
            "3",
            "--max-tokens",
            "4",
            "--run-dir",
            str(tmp_path / "l"),
        ]
    )
    assert code == 0
    assert "bench serve load" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--extra-body", "{nope"], "--extra-body"),
        (["--chat-template-kwargs", "[1]"], "--chat-template-kwargs"),
        (["--levels", "1,x"], "--levels"),
        (["--levels", "0"], "--levels"),
        (["--base-url", "ftp://x"], "--base-url"),
        (["--mode", "load", "--rates", "1,x"], "--rates"),
        (["--mode", "load", "--rates", "0"], "--rates"),
    ],
)
def test_serve_bad_input_exits_2_naming_the_field(
    prompts: Path, tmp_path: Path, args: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = [
        "bench",
        "serve",
        "--base-url",
        "http://127.0.0.1:9",
        "--prompts",
        str(prompts),
        "--run-dir",
        str(tmp_path),
    ]
    assert main(base + args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert field in err[0]


def test_rounds_bad_input_and_held_lock(
    prompts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "m.json"
    manifest.write_text(
        json.dumps({"engines": [{"label": "a", "argv": ["x"], "port": 99999, "model": {"id": "m"}}]})
    )
    assert main(["bench", "rounds", "--manifest", str(manifest), "--prompts", str(prompts)]) == 2
    assert "manifest.engines.0.port" in capsys.readouterr().err
    manifest.write_text(
        json.dumps({"engines": [{"label": "a", "argv": ["x"], "port": 9, "model": {"id": "m"}}]})
    )
    assert (
        main(["bench", "rounds", "--manifest", str(manifest), "--prompts", str(tmp_path / "none.jsonl")]) == 2
    )
    assert "--prompts" in capsys.readouterr().err
    assert (
        main(
            [
                "bench",
                "rounds",
                "--manifest",
                str(manifest),
                "--prompts",
                str(prompts),
                "--ci-target",
                "0.1",
                "--rounds",
                "2",
                "--min-rounds",
                "4",
                "--run-dir",
                str(tmp_path / "r"),
            ]
        )
        == 2
    )
    assert "--min-rounds" in capsys.readouterr().err
    monkeypatch.setenv("GCO_GPU_LOCK", str(tmp_path / "gpu.lock"))
    with GpuLock():
        code = main(
            [
                "bench",
                "rounds",
                "--manifest",
                str(manifest),
                "--prompts",
                str(prompts),
                "--run-dir",
                str(tmp_path / "run"),
            ]
        )
    assert code == 1
    assert "GPU lock" in capsys.readouterr().err
    assert main(["bench", "report", str(tmp_path)]) == 2


def test_schema_command_prints_both_schemas(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "schema", "manifest"]) == 0
    assert "engines" in json.loads(capsys.readouterr().out)["properties"]
    assert main(["bench", "schema", "evidence"]) == 0
    assert json.loads(capsys.readouterr().out)["properties"]["id"]["pattern"] == "^[0-9a-f]{64}$"
