"""What a reader of a rounds record checks before trusting it: served model, gates, self-reports, failures.

Fake engines as real processes; one round each, so the runs stay short.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gco.bench.rounds.lock import GpuLock
from gco.cli import main
from tests.functional.bench.conftest import rounds_engine, run_rounds_cli, write_inputs

NON_DEFAULT = (
    "INFO 01-01 00:00:00 [utils.py:1] non-default args: {'model': 'fake/model', 'enforce_eager': True, "
    "'max_model_len': 4096}"
)


def test_wrong_model_gate_and_self_reports_are_told_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engines = [
        rounds_engine("gated", "--setting", "enforce_eager=True", "--log-line", NON_DEFAULT),
        rounds_engine("wrong", "--model", "other/model"),
        rounds_engine("good"),
    ]
    out = run_rounds_cli(
        tmp_path, monkeypatch, *write_inputs(tmp_path, engines, max_tokens=4), "--rounds", "1"
    )
    record = out["evidence"]
    assert record.claim_class == "observed"
    cells = {c["label"]: c for c in record.data["cells"]}
    assert cells["wrong"]["status"] == "wrong_model"
    assert cells["wrong"]["served_models"] == ["other/model"]
    assert cells["wrong"]["served_model"] is None
    assert cells["gated"]["status"] == "ok"
    texts = {item.code: item.text for item in record.limitations}
    assert "hard_gate_violation" in texts
    assert "failed_requests" not in texts
    assert texts["failed_cells"] == "1 cell(s) failed with status wrong_model: wrong round 1"
    reported = [item.text for item in record.limitations if item.code == "self_reported_settings"]
    gated = next(text for text in reported if text.startswith("gated: non-default args it reported: "))
    assert "enforce_eager, max_model_len, model" in gated
    ranked = {m["label"] for m in out["summary"]["metrics"] if m["ranked"]}
    assert ranked == {"good"}
    assert {m["label"] for m in out["summary"]["metrics"]} == {"gated", "good"}
    good = cells["good"]
    assert good["started_at"] < good["ended_at"]
    assert good["counter_deltas"]["vllm:request_success_total"] == 4
    assert good["evidence_id"]
    resolved = json.loads(
        (out["run"] / "rounds" / f"r01-{good['position']}-good" / "resolved_config.json").read_text()
    )
    assert resolved["status"] == "RESOLVED"
    roles = {(a.path.split("/")[1], a.role) for a in record.artifacts if a.path.startswith("rounds/r")}
    for role in ("engine log", "resolved config", "metrics before", "metrics after", "measurement evidence"):
        assert (f"r01-{good['position']}-good", role) in roles


def test_load_reference_flag_lock_flag_and_failures_with_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engines = [rounds_engine("flaky", "--fail-rate", "0.3", "--seed", "1", "--itl-ms", "2")]
    manifest, prompts = write_inputs(
        tmp_path,
        engines,
        max_tokens=4,
        extra_body={"stream": True, "ignore_eos": True},
        load={"levels": [1], "requests_per_level": 8, "arrival": "constant", "reference_e2e_s": 9.0},
    )
    held = tmp_path / "held.lock"
    with GpuLock(held):
        monkeypatch.setenv("GCO_GPU_LOCK", str(held))
        run = tmp_path / "run"
        argv = [
            "bench",
            "rounds",
            "--manifest",
            str(manifest),
            "--prompts",
            str(prompts),
            "--run-dir",
            str(run),
        ]
        flags = [
            "--mode",
            "load",
            "--rounds",
            "1",
            "--ref-e2e-ms",
            "40",
            "--gpu-lock",
            str(tmp_path / "own.lock"),
        ]
        assert main([*argv, *flags]) == 0
    cell = json.loads((run / "rounds" / "cells.jsonl").read_text().splitlines()[0])
    assert cell["serve"]["reference_e2e_s"] == pytest.approx(0.04)
    plan = json.loads((run / "rounds" / "plan.json").read_text())
    assert plan["load_reference"] == {"e2e_s": 0.04, "source": "--ref-e2e-ms", "to_measure": False}
    summary = json.loads((run / "rounds" / "summary.json").read_text())
    texts = [item["text"] for item in summary["limitations"] if item["code"] == "failed_requests"]
    failed = cell["serve"]["failed"]
    assert failed > 0
    assert (
        f"flaky/all: {failed} of 8 requests failed over 1 round(s); "
        "values at N* come only from levels without a failure" in texts
    )
    extra = next(item["text"] for item in summary["limitations"] if item["code"] == "extra_request_body")
    assert extra.endswith("it overrides measured fields: stream")


def test_min_rounds_needs_ci_target_and_ref_needs_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest, prompts = write_inputs(tmp_path, [rounds_engine("a")])
    argv = ["bench", "rounds", "--manifest", str(manifest), "--prompts", str(prompts)]
    assert main([*argv, "--min-rounds", "2", "--run-dir", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err.startswith("error: --min-rounds: only applies with --ci-target")
    assert main([*argv, "--ref-e2e-ms", "5", "--run-dir", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err.startswith("error: --ref-e2e-ms: ")
    assert not (tmp_path / "r").exists()
