"""A `gco matrix run` killed after its deploy steps, a resume refused for a changed image, then a
resume that finishes without deploying again; and the CLI's answers to bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gco.cli import main
from gco.endpoints import EndpointStore, operations
from gco.validation.checkpoint import CHECKPOINT
from gco.validation.run import Matrix, new_checkpoint
from gco.validation.service import load_settings, resume
from tests.functional.validation.conftest import (
    StackFactory,
    assert_nothing_left,
    ports,
    stack_environment,
    write_settings,
)
from tests.unit.validation.sample import SETTINGS

GCO = str(Path(sys.executable).with_name("gco"))
DEADLINE_S = 90.0


def _checkpoint(run_dir: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((run_dir / CHECKPOINT).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


@pytest.mark.slow
def test_a_crash_after_deploy_then_resume_deploys_nothing_again(
    make_stack: StackFactory,
    store: EndpointStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stack = make_stack()
    stack_environment(stack, monkeypatch)
    settings_path = write_settings(tmp_path / "settings.json")
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        [GCO, "matrix", "run", str(settings_path), "--consent", "--run-dir", str(run_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + DEADLINE_S
        deployed: list[object] = []
        while time.monotonic() < deadline and process.poll() is None:
            steps = _checkpoint(run_dir).get("steps") or []
            deployed = [s for s in steps if isinstance(s, dict) and s["step"] == "deploy"]
            if len(deployed) == 4:
                break
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)  # a crash: no cleanup, no evidence
    finally:
        process.kill()
        process.wait(timeout=10)
    assert len(deployed) == 4, "the run did not reach its deploy steps"
    before = _checkpoint(run_dir)
    assert before["finished"] is False
    run_id = str(before["run_id"])
    lifecycles = {e["name"]: e["lifecycle_id"] for e in before["endpoints"]}
    assert all(lifecycles.values())

    # A changed image: refused before anything is touched, naming the field.
    changed = json.loads(settings_path.read_text(encoding="utf-8"))
    changed["inference_runtimes"][0]["image"] = "vllm/vllm-openai@sha256:" + "9" * 64
    settings_path.write_text(json.dumps(changed), encoding="utf-8")
    capsys.readouterr()
    assert main(["matrix", "resume", str(run_dir)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith(
        "error: inference_runtimes[0].image: differs from the identity"
    )
    assert _checkpoint(run_dir) == before

    # The same settings: the run continues and no endpoint is deployed a second time.
    settings_path.write_text(json.dumps(SETTINGS), encoding="utf-8")
    assert main(["matrix", "resume", str(run_dir), "--output", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["verdict"] == "pass" and answer["run_id"] == run_id
    after = _checkpoint(run_dir)
    steps = after["steps"]
    assert isinstance(steps, list)
    assert [s["endpoint"] for s in steps if s["step"] == "deploy"] == list(lifecycles)  # each once
    assert {e["name"]: e["lifecycle_id"] for e in after["endpoints"]} == lifecycles
    assert after["finished"] is True and after["evidence_id"] == answer["evidence_id"]
    assert_nothing_left(stack, store, run_id)


def test_cli_validate_prints_the_identity_and_refuses_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_settings(tmp_path / "settings.json")
    assert main(["matrix", "validate", str(path)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (
        document["contract_version"] == 2 and document["shared_proxy"]["metric_type"] == "ContainerResource"
    )
    bad = write_settings(tmp_path / "bad.yaml", hpa_cpu_target=True)
    assert main(["matrix", "validate", str(bad)]) == 2
    assert capsys.readouterr().err == "error: hpa_cpu_target: must be an integer from 1 to 100\n"
    (tmp_path / "broken.yaml").write_text("a: [", encoding="utf-8")
    assert main(["matrix", "validate", str(tmp_path / "broken.yaml")]) == 2
    assert capsys.readouterr().err.startswith("error: SETTINGS: ")


def test_cli_run_needs_consent_and_resume_needs_a_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_settings(tmp_path / "settings.json")
    assert main(["matrix", "run", str(path)]) == 2
    assert capsys.readouterr().err == "error: --consent: required: the run deploys and destroys endpoints\n"
    refused = write_settings(tmp_path / "refused.json", consent=False)
    assert main(["matrix", "run", str(refused), "--consent"]) == 2
    assert "error: consent: must be true" in capsys.readouterr().err
    assert main(["matrix", "resume", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.startswith("error: RUN_DIR: no checkpoint at ")


class Crash(BaseException):
    """Stops a run in-process where a crash would (not an error the run could catch)."""


def test_a_resume_redeploys_only_an_endpoint_that_vanished(
    make_stack: StackFactory, store: EndpointStore, tmp_path: Path
) -> None:
    stack = make_stack()
    path = write_settings(tmp_path / "settings.json")
    run_dir = tmp_path / "run"
    settings = load_settings(path)

    def crash_after_deploys(line: str) -> None:
        if " deploy mx-v1-tgi-hpa pass" in line:
            raise Crash

    matrix = Matrix(
        settings=settings, store=store, run_dir=run_dir, progress=crash_after_deploys, **ports(stack)
    )
    with pytest.raises(Crash):
        matrix.execute(new_checkpoint(settings, path, "v1"))
    before = {e["name"]: e["lifecycle_id"] for e in _checkpoint(run_dir)["endpoints"]}
    # Someone else deletes one endpoint while the run is down; the reconciler purges it.
    operations.delete(store, "mx-v1-vllm-hpa")
    deadline = time.monotonic() + DEADLINE_S
    while store.get("mx-v1-vllm-hpa", consistent_read=True) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    result = resume(run_dir, store, **ports(stack))
    assert result.verdict == "pass", result.summary
    after = _checkpoint(run_dir)
    lifecycles = {e["name"]: e["lifecycle_id"] for e in after["endpoints"]}
    assert lifecycles["mx-v1-vllm-hpa"] != before["mx-v1-vllm-hpa"]
    assert {k: v for k, v in lifecycles.items() if k != "mx-v1-vllm-hpa"} == {
        k: v for k, v in before.items() if k != "mx-v1-vllm-hpa"
    }
    superseded = after["superseded"]
    assert isinstance(superseded, list)
    assert [(s["step"], s["endpoint"]) for s in superseded] == [("deploy", "mx-v1-vllm-hpa")]
    assert_nothing_left(stack, store, "v1")
