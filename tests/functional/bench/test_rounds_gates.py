"""`gco bench rounds` over engines that print real vLLM 0.11 and SGLang start-up lines, one launched with
`--cpu-offload-gb 8` (which vLLM 0.11 prints only among its non-default args, never in its config line):
the offload is a hard-gate violation read from the launch command and the engine is not ranked; the
others resolve; the record carries the contract's ratio statistic, n = paired rounds, and its fields.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gco.cli import main
from tests.functional.bench.conftest import rounds_engine, run_rounds_cli, write_inputs


def test_an_offloading_engine_is_a_gate_violation_and_unranked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engines = [
        rounds_engine("clean", "--style", "vllm", "--itl-ms", "2"),
        rounds_engine("sgl", "--style", "sglang", "--itl-ms", "2"),
        rounds_engine("offload", "--style", "vllm", "--cpu-offload-gb", "8", "--itl-ms", "1"),
        rounds_engine("never", "--never-ready", timeout=0.3),
    ]
    manifest, prompts = write_inputs(tmp_path, engines, max_tokens=4)
    out = run_rounds_cli(
        tmp_path, monkeypatch, manifest, prompts, "--rounds", "2", "--warmup", "0", "--stop-timeout-s", "5"
    )
    record = out["evidence"]
    configs = record.data["resolved_configs"]
    assert {entry["status"] for entry in configs["clean"] + configs["sgl"]} == {"RESOLVED"}
    assert all(entry["gate_violations"] == [] for entry in configs["clean"] + configs["sgl"])
    offload = configs["offload"][0]
    assert offload["status"] == "RESOLVED"
    assert offload["gate_violations"] == ["gpu offload"]
    assert offload["gate_evidence"]["gpu offload"] == [
        "logged args cpu_offload_gb=8.0",
        "argv --cpu-offload-gb 8",
    ]
    assert "cpu_offload_gb" not in offload["settings"]  # vLLM 0.11's config line does not print it
    violation = next(item for item in record.limitations if item.code == "hard_gate_violation")
    assert violation.text == (
        "offload: gpu offload (logged args cpu_offload_gb=8.0; argv --cpu-offload-gb 8); not ranked"
    )
    heads = {
        m["label"]: m
        for m in out["summary"]["metrics"]
        if m["bucket"] == "all" and m["metric"] == "decode_tps"
    }
    assert not heads["offload"]["ranked"] and heads["offload"]["ratio_to_best"] is None
    best = out["summary"]["best_engine"]
    assert best in ("clean", "sgl")  # the offloading engine is the fastest, but not ranked
    ratios = [
        m
        for m in record.metrics
        if m.name in ("decode_tps_ratio_to_best", "decode_tps_paired_ratio_to_best")
        and m.subject.endswith(f"/all / {best}")
    ]
    assert {(m.name, m.statistic) for m in ratios} == {
        ("decode_tps_ratio_to_best", "ratio_of_medians"),
        ("decode_tps_paired_ratio_to_best", "median_of_paired_ratios"),
    }
    assert all(not m.subject.startswith("offload/") for m in record.metrics if m.unit == "ratio")
    assert all(m.n == 2 for m in ratios)  # both rounds are paired
    assert "never: no successful round" in record.missing
    assert record.identity["run_settings"]["warmup"] == {"manifest": 1, "flag": 0, "used": 0}
    assert record.identity["run_settings"]["stop_timeout_s"] == {"manifest": 1.0, "flag": 5.0, "used": 5.0}
    assert record.data["metric_definitions"]["statistics"]["ratio_of_medians"].startswith(
        "this engine's median"
    )
    assert [(f["label"], f["kind"]) for f in record.data["failures"]] == [("never", "not_ready")] * 2
    assert record.summary.endswith("(observed); no extra request body")


def test_a_serve_cmd_that_would_not_format_launches_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "launched"
    engine = rounds_engine("a")
    engine["argv"] = ["sh", "-c", f"touch {marker}"]
    manifest, prompts = write_inputs(tmp_path, [engine])
    run = tmp_path / "run"
    argv = ["bench", "rounds", "--manifest", str(manifest), "--prompts", str(prompts), "--run-dir", str(run)]
    assert main([*argv, "--serve-cmd", """curl {base_url} -d '{"max_tokens": 8}'"""]) == 2
    assert capsys.readouterr().err.startswith('error: --serve-cmd: {"max_tokens": 8} in')
    assert not marker.exists() and not run.exists()


def test_the_startup_timeout_flag_wins_over_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = rounds_engine("never", "--never-ready")
    engine["ready_check"] = {"interval_s": 0.05}  # no timeout of its own: the run's applies (1200 s)
    manifest, prompts = write_inputs(tmp_path, [engine])
    out = run_rounds_cli(
        tmp_path, monkeypatch, manifest, prompts, "--rounds", "1", "--startup-timeout-s", "0.5"
    )
    cell = out["evidence"].data["cells"][0]
    assert (cell["status"], cell["error"]) == ("not_ready", "ready check /health: timeout")
    startup = out["evidence"].identity["run_settings"]["startup_timeout_s"]
    assert startup == {"manifest": 1200.0, "flag": 0.5, "used": 0.5}
