"""Limitations with numbers: failures apart from gates, named cells, distinct warnings, adaptive looks."""

from __future__ import annotations

from typing import Any

import pytest

from gco.bench.analysis.enginelog import ResolvedConfig
from gco.bench.clients.records import ClientHealth, ClipResult, ServeResult
from gco.bench.rounds.cell import CellResult
from gco.bench.rounds.gpu import MemoryCheck
from gco.bench.rounds.limitations import cell_limitations, plan_limitations
from gco.bench.rounds.summary import Adaptive, AdaptiveCheck, summarize
from gco.bench.rounds.williams import plan_rounds
from gco.processes.launch import StopReport

HEALTHY = ClientHealth(lag_p50_ms=0.0, lag_p99_ms=0.1, lag_max_ms=0.2, lagged=False)
RESOLVED = ResolvedConfig(family="vllm", status="RESOLVED", cuda_graphs=True, gpu_offload=False)


def _serve(ok: int, failed: int = 0) -> ServeResult:
    values = {"decode_tps": 100.0, "requests": float(ok)}
    return ServeResult(
        mode="single",
        api="completions",
        base_url="http://127.0.0.1:1",
        model="m",
        prompt_digest="d",
        requests=ok + failed,
        failed=failed,
        buckets={"all": values, "0-128": values},
        failed_by_bucket={"all": failed, "0-128": failed},
        client=HEALTHY,
    )


def _clip(cpm: float, ok: int = 2, failed: int = 0) -> ClipResult:
    values = {"clips": float(ok), "e2e_ms": 60000 / cpm, "clips_per_min": cpm}
    return ClipResult(
        base_url="http://127.0.0.1:1",
        clip_digest="d",
        clips=ok + failed,
        failed=failed,
        shapes={"all": values, "small": values},
        failed_by_shape={"all": failed, "small": failed},
    )


def _cell(label: str, round_no: int, **update: Any) -> CellResult:
    values: dict[str, Any] = {
        "label": label,
        "round": round_no,
        "position": 0,
        "status": "ok",
        "serve": _serve(4),
        "stop": StopReport(signal="SIGTERM", group_gone=True, survivors=[], exit_code=0),
        "memory": MemoryCheck(status="returned", before_mib=0, after_mib=0, tolerance_mib=512),
        "config": RESOLVED,
    }
    return CellResult(**{**values, **update})


def _texts(cells: list[CellResult], mode: str = "single") -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in cell_limitations(cells, sorted({c.label for c in cells}), mode):
        out.setdefault(item.code, []).append(item.text)
    return out


def test_a_gated_engine_without_failures_is_gated_not_failed() -> None:
    gated = RESOLVED.model_copy(update={"cuda_graphs": False})
    texts = _texts([_cell("a", 1, config=gated), _cell("a", 2, config=gated), _cell("b", 1)])
    assert texts["hard_gate_violation"] == ["a: cuda graphs off; not ranked"]
    assert "failed_requests" not in texts


def test_failed_requests_are_counted_over_rounds_per_bucket() -> None:
    cells = [_cell("a", 1, serve=_serve(3, 1)), _cell("a", 2, serve=_serve(4)), _cell("b", 1)]
    assert _texts(cells)["failed_requests"] == [
        "a/0-128: 1 of 8 requests failed over 2 round(s); not ranked there",
        "a/all: 1 of 8 requests failed over 2 round(s); not ranked there",
    ]
    load = _texts(cells, "load")["failed_requests"][1]
    assert load.startswith("a/all: 1 of 8 requests failed over 2 round(s); values at N* come only from")
    clip = [_cell("v", 1, serve=None, clip=_clip(60.0, ok=1, failed=1))]
    assert (
        _texts(clip, "clip")["failed_requests"][0]
        == "v/all: 1 of 2 clips failed over 1 round(s); not ranked there"
    )


def test_failed_cells_are_named_by_status() -> None:
    cells = [
        _cell("a", 1, status="crashed", serve=None),
        _cell("a", 2, status="wrong_model", serve=None),
        _cell("b", 2, status="crashed", serve=None),
    ]
    assert _texts(cells)["failed_cells"] == [
        "2 cell(s) failed with status crashed: a round 1, b round 2",
        "1 cell(s) failed with status wrong_model: a round 2",
    ]


def test_distinct_warning_lines_and_self_reported_names() -> None:
    first = RESOLVED.model_copy(
        update={
            "warnings": [
                "WARNING 01-01 00:00:01 [x.py:1] slow tokenizer",
                "WARNING 01-01 00:00:02 [y.py:2] other",
            ],
            "self_reported": {"max_model_len": "4096", "enforce_eager": "False"},
        }
    )
    second = RESOLVED.model_copy(update={"warnings": ["WARNING 01-01 00:09:09 [x.py:1] slow tokenizer"]})
    self_only = ResolvedConfig(family="vllm", status="SELF_REPORTED", self_reported={"dtype": "auto"})
    texts = _texts(
        [_cell("a", 1, config=first), _cell("a", 2, config=second), _cell("b", 1, config=self_only)]
    )
    assert texts["engine_warnings"] == [
        "a: 2 distinct warning line(s): 'WARNING [x.py:1] slow tokenizer' (2 of 2 rounds); "
        "'WARNING [y.py:2] other' (1 of 2 rounds)"
    ]
    assert texts["self_reported_settings"] == [
        "a: non-default args it reported: enforce_eager, max_model_len (its config line decides)"
    ]
    assert texts["self_reported_config"] == ["b: configuration only self-reported: dtype"]


def test_adaptive_checks_are_quoted_and_extra_body_overrides_named() -> None:
    checks = [
        AdaptiveCheck(round=4, half_widths={"a": 0.0, "b": 0.125}, met=False),
        AdaptiveCheck(round=6, half_widths={"a": 0.0, "b": None}, met=False),
    ]
    adaptive = Adaptive(
        ci_target=0.05, min_rounds=4, max_rounds=6, stopped_at=6, outcome="maximum reached", checks=checks
    )
    limits = plan_limitations(
        plan_rounds(["a", "b"], 6),
        6,
        secret_env={},
        extra_body={"max_tokens": 9, "model": "x", "top_k": 1},
        other_gpu_processes=None,
        adaptive=adaptive,
    )
    texts = {item.code: item.text for item in limits}
    assert texts["extra_request_body"].endswith("it overrides measured fields: max_tokens, model")
    assert texts["optional_stopping"] == (
        "adaptive stop (CI half-width <= 0.05, rounds 4..6): maximum reached; "
        "half-widths at each check: round 4: a 0.0000, b 0.1250; round 6: a 0.0000, b -"
    )


def test_clip_summaries_are_observed_and_rank_by_clips_per_minute() -> None:
    plan = plan_rounds(["v", "w"], 2)
    cells = [_cell("v", r, serve=None, clip=_clip(cpm)) for r, cpm in ((1, 60.0), (2, 62.0))] + [
        _cell("w", r, serve=None, clip=_clip(cpm)) for r, cpm in ((1, 30.0), (2, 31.0))
    ]
    summary = summarize(plan, cells, mode="clip", rounds_run=2, limitations=[])
    assert summary.headline_metric == "clips_per_min"
    assert summary.best_engine == "v"
    assert {m.claim_class for m in summary.metrics} == {"observed"}
    heads = {m.label: m for m in summary.metrics if m.bucket == "all" and m.metric == "clips_per_min"}
    assert heads["w"].ratio_to_best == pytest.approx(0.5)
    e2e = {m.label: m for m in summary.metrics if m.bucket == "all" and m.metric == "e2e_ms"}
    assert e2e["w"].ratio_to_best == pytest.approx(2.0)
    assert "clips_per_min 61.0 clips/min" in summary.line
