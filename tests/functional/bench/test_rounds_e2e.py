"""End to end: `gco bench rounds` over fake engines as real processes, healthy and with every failure path.

The fake engines' speeds are known only nominally: sleep granularity, scheduling and the engines' own
noise make each cell deliver its nominal decode rate times a factor near 1. The known-ratio check reads
those factors from the run's own cells, so the truth each CI must meet is known to the precision this
run realized, not to a tuned constant.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gco.processes.proc import alive
from tests.functional.bench.conftest import rounds_engine as _engine
from tests.functional.bench.conftest import run_rounds_cli as _run
from tests.functional.bench.conftest import write_inputs as _write

ITL_MS = 6.0


def realized_band(run: Path, speeds: dict[str, float], label: str, best: str) -> tuple[float, float]:
    """Where the ratio label/best of decode rates really lies in this run: its nominal value times
    the extreme per-cell factors (each cell's median decode rate over its nominal rate)."""
    factors: dict[str, list[float]] = {name: [] for name in speeds}
    for cell in (run / "rounds").glob("r*-*"):
        name = cell.name.split("-", 2)[2]
        measured = json.loads((cell / "serve" / "result.json").read_text())["buckets"]["all"]["decode_tps"]
        factors[name].append(measured / (1000.0 / ITL_MS * speeds[name]))
    nominal = speeds[label] / speeds[best]
    return (
        nominal * min(factors[label]) / max(factors[best]),
        nominal * max(factors[label]) / min(factors[best]),
    )


@pytest.mark.slow
def test_three_engines_of_known_speed_ratios(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    speeds = {"fast": 2.0, "mid": 1.5, "slow": 1.0}
    styles = {"fast": "vllm", "mid": "sglang", "slow": "tgi"}
    engines = [
        _engine(
            label,
            "--itl-ms",
            str(ITL_MS),
            "--ttft-ms",
            "3",
            "--speed",
            str(speed),
            "--noise",
            "0.02",
            "--style",
            styles[label],
        )
        for label, speed in speeds.items()
    ]
    out = _run(tmp_path, monkeypatch, *_write(tmp_path, engines))
    summary = out["summary"]
    assert summary["rounds_run"] == 6
    assert summary["balanced"]
    assert summary["cells_ok"] == 18
    # vLLM names its non-default args; TGI 2.2 logs no attention backend (its config stays PARTIAL); a
    # loaded machine can lag the client: each is a named threat, and the ratios are checked all the same
    assert out["codes"] <= {
        "gpu_memory_not_checked",
        "other_gpu_processes",
        "self_reported_settings",
        "unresolved_config",
        "client_lagged",
    }
    unresolved = [item["text"] for item in summary["limitations"] if item["code"] == "unresolved_config"]
    assert unresolved == ["slow: configuration PARTIAL"]
    assert len(out["plan"]["plan"]["rounds"]) == 6
    heads = {
        m["label"]: m for m in summary["metrics"] if m["bucket"] == "all" and m["metric"] == "decode_tps"
    }
    assert summary["best_engine"] == "fast"
    for label in speeds:
        lo, hi = heads[label]["ratio_ci95"]
        band_lo, band_hi = realized_band(out["run"], speeds, label, "fast")
        assert lo <= band_hi and band_lo <= hi, (label, heads[label], (band_lo, band_hi))
    cells = [json.loads(line) for line in (out["run"] / "rounds" / "cells.jsonl").read_text().splitlines()]
    assert all(c["prefix_cache"]["hit_rate"] == 0.0 for c in cells)
    assert all(c["stop"]["signal"] == "SIGTERM" and c["stop"]["group_gone"] for c in cells)
    statuses = {c["label"]: c["config"]["status"] for c in cells}
    assert statuses == {"fast": "RESOLVED", "mid": "RESOLVED", "slow": "PARTIAL"}
    assert all(c["config"]["gpu_offload"] is False and c["config"]["cuda_graphs"] for c in cells)
    assert out["evidence"].claim_class == "observed"
    assert out["evidence"].summary == summary["line"]


def test_every_failure_path_is_named_and_the_run_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "hf_" + "s" * 30
    engines = [
        _engine("crashy", "--crash-after", "3", "--crash-once-file", str(tmp_path / "crashed")),
        _engine("never", "--never-ready", timeout=0.5),
        _engine("stubborn", "--ignore-sigterm", "--leave-child"),
        _engine("flaky", "--fail-rate", "0.5", "--seed", "3"),
        _engine(
            "odd",
            "--setting",
            "enforce_eager=True",
            "--log-line",
            "WARNING 01-01 [envs.py:1] Unknown vLLM environment variable detected: VLLM_FOO",
            env={"HF_TOKEN": secret, "GCO_TEST_SURELY_UNSET": None, "PYTHONPATH": None},
        ),
    ]
    manifest, prompts = _write(tmp_path, engines, max_tokens=4)
    out = _run(
        tmp_path, monkeypatch, manifest, prompts, "--rounds", "1", "--extra-body", '{"ignore_eos": true}'
    )
    assert out["codes"] >= {
        "unbalanced_order",
        "few_rounds",
        "failed_cells",
        "no_successful_round",
        "failed_requests",
        "sigkill",
        "sigkill_survivors",
        "hard_gate_violation",
        "unknown_settings",
        "engine_warnings",
        "secret_env_values",
        "inherited_env_missing",
        "extra_request_body",
        "gpu_memory_not_checked",
    }
    statuses = {c["label"]: c["status"] for c in out["evidence"].data["cells"]}
    assert statuses["crashy"] == "crashed"
    assert statuses["never"] == "not_ready"
    stubborn = next(c for c in out["evidence"].data["cells"] if c["label"] == "stubborn")
    assert stubborn["stop"]["survivors"]
    assert not any(alive(pid) for pid in stubborn["stop"]["survivors"])
    ranked = {m["label"] for m in out["summary"]["metrics"] if m["ranked"] and m["bucket"] == "all"}
    assert ranked == {"stubborn"}
    for path in out["run"].rglob("*"):
        if path.is_file() and path.suffix in (".json", ".md", ".html", ".jsonl"):
            assert secret not in path.read_text(), path


@pytest.mark.slow
def test_load_mode_shares_the_reference_and_stops_adaptively(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engines = [
        # alike, so that both sustain a level: the rule waits for every engine's interval
        _engine("a", "--itl-ms", "5", "--ttft-ms", "30"),
        _engine("b", "--itl-ms", "5", "--ttft-ms", "30"),
    ]
    manifest, prompts = _write(
        tmp_path,
        engines,
        max_tokens=6,
        load={"levels": [1, 2], "requests_per_level": 4, "arrival": "constant"},
    )
    out = _run(
        tmp_path, monkeypatch, manifest, prompts, "--mode", "load", "--ci-target", "10", "--rounds", "6"
    )
    summary = out["summary"]
    assert summary["adaptive"]["outcome"] == "target met"
    assert summary["rounds_run"] == 4
    assert "optional_stopping" in out["codes"]
    checks = out["plan"]["adaptive"]["checks"]
    assert [check["round"] for check in checks] == [4]
    assert checks[0]["met"]
    assert set(checks[0]["half_widths"]) == {"a", "b"}
    stopping = next(item["text"] for item in summary["limitations"] if item["code"] == "optional_stopping")
    assert (
        f"round 4: a {checks[0]['half_widths']['a']:.4f}, b {checks[0]['half_widths']['b']:.4f}" in stopping
    )
    assert out["plan"]["load_reference"]["source"] == "warm-up of " + cells_first_label(out)
    assert "differing_load_schedules" not in out["codes"]
    cells = [json.loads(line) for line in (out["run"] / "rounds" / "cells.jsonl").read_text().splitlines()]
    references = {c["serve"]["reference_e2e_s"] for c in cells}
    assert len(references) == 1
    assert {m["metric"] for m in summary["metrics"]} >= {"n_star", "output_tps"}
    assert all(m["claim_class"] == "derived" for m in summary["metrics"])


def cells_first_label(out: dict[str, Any]) -> str:
    first = json.loads((out["run"] / "rounds" / "cells.jsonl").read_text().splitlines()[0])
    return f"{first['label']} round 1"


def test_serve_cmd_is_kept_as_a_digest_and_its_failure_is_a_cell_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest, prompts = _write(tmp_path, [_engine("a")])
    command = "false --token=sekrit {base_url} {label} {round}"
    out = _run(tmp_path, monkeypatch, manifest, prompts, "--rounds", "1", "--serve-cmd", command)
    identity = out["evidence"].identity
    assert len(identity["serve_cmd_sha256"]) == 64
    assert "sekrit" not in json.dumps(out["evidence"].model_dump(mode="json"))
    assert out["evidence"].data["cells"][0]["status"] == "serve_failed"
    assert "failed_cells" in out["codes"]


def test_a_busy_port_is_a_failed_launch_not_a_false_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        engine = _engine("a")
        engine["port"] = squatter.getsockname()[1]
        out = _run(tmp_path, monkeypatch, *_write(tmp_path, [engine]), "--rounds", "1")
    cell = out["evidence"].data["cells"][0]
    assert cell["status"] == "launch_failed"
    assert "already in use" in cell["error"]
    assert "no_successful_round" in out["codes"]


def test_engine_subset_and_evidence_copy_in_s3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto: Any
) -> None:
    from gco import aws

    s3 = aws.client("s3", endpoint_url=moto.url)
    s3.create_bucket(Bucket="gco-evidence")
    manifest, prompts = _write(tmp_path, [_engine("a"), _engine("b", "--never-ready", timeout=0.2)])
    out = _run(
        tmp_path,
        monkeypatch,
        manifest,
        prompts,
        "--rounds",
        "1",
        "--engines",
        "a",
        "--evidence-bucket",
        "gco-evidence",
    )
    assert out["summary"]["engines"] == ["a"]
    assert out["summary"]["cells_ok"] == 1
    body = s3.get_object(Bucket="gco-evidence", Key=f"evidence/{out['evidence'].id}.json")["Body"].read()
    assert json.loads(body)["id"] == out["evidence"].id
