"""Summaries from synthetic cells: medians, ratios to the best, ranking rules, limitations, summary line."""

from __future__ import annotations

from typing import Any

import pytest

from gco.bench.analysis.enginelog import ResolvedConfig
from gco.bench.analysis.metrics import PrefixCache
from gco.bench.clients.records import ClientHealth, ServeResult
from gco.bench.rounds.cell import CellResult
from gco.bench.rounds.gpu import MemoryCheck
from gco.bench.rounds.limitations import cell_limitations, plan_limitations
from gco.bench.rounds.summary import Adaptive, ratio_half_widths, summarize
from gco.bench.rounds.williams import plan_rounds
from gco.processes.launch import StopReport

HEALTHY = ClientHealth(lag_p50_ms=0.0, lag_p99_ms=0.1, lag_max_ms=0.2, lagged=False)


def _serve(tps: float, failed: int = 0, **extra: Any) -> ServeResult:
    values = {"decode_tps": tps, "ttft_ms": 1000 / tps, "requests": 4.0}
    return ServeResult(
        mode="single",
        api="completions",
        base_url="http://127.0.0.1:1",
        model="m",
        prompt_digest="d",
        requests=4,
        failed=failed,
        buckets={"all": values, "0-128": values},
        failed_by_bucket={"all": failed, "0-128": failed},
        client=HEALTHY,
        **extra,
    )


def _cell(label: str, round_no: int, tps: float, **update: Any) -> CellResult:
    cell = CellResult(
        label=label,
        round=round_no,
        position=0,
        status="ok",
        serve=_serve(tps),
        stop=StopReport(signal="SIGTERM", group_gone=True, survivors=[], exit_code=0),
        memory=MemoryCheck(status="returned", before_mib=0, after_mib=0, tolerance_mib=512),
        config=ResolvedConfig(family="vllm", status="RESOLVED", cuda_graphs=True, gpu_offload=False),
    )
    return cell.model_copy(update=update)


def test_ratios_to_the_best_engine_and_summary_line() -> None:
    plan = plan_rounds(["a", "b"], 4)
    cells = [_cell("a", r, 100.0 + r) for r in range(1, 5)] + [
        _cell("b", r, 50.0 + r / 2) for r in range(1, 5)
    ]
    summary = summarize(plan, cells, mode="single", rounds_run=4, limitations=[], extra_body={"top_k": 1})
    heads = {m.label: m for m in summary.metrics if m.bucket == "all" and m.metric == "decode_tps"}
    assert heads["b"].best_label == "a"
    assert heads["b"].ratio_to_best == pytest.approx(51.25 / 102.5)  # ratio of the medians
    assert heads["b"].ratio_n == 4
    assert heads["b"].paired_ratio_median == pytest.approx(0.5)
    assert heads["a"].ratio_to_best == pytest.approx(1.0)
    ttft = {m.label: m for m in summary.metrics if m.bucket == "all" and m.metric == "ttft_ms"}
    assert ttft["b"].ratio_to_best == pytest.approx(2.0)
    assert heads["a"].claim_class == "observed"
    assert summary.best_engine == "a"
    assert summary.line.startswith("2 engines x 4 rounds (single), 8/8 cells ok, balanced Williams order")
    assert summary.line.endswith("best a decode_tps 102.5 tok/s (observed); extra request body: top_k")
    assert ratio_half_widths(summary.metrics, "single", ["a", "b"]) == {
        "a": pytest.approx(0.0),
        "b": pytest.approx(0.0),
    }
    assert ratio_half_widths(summary.metrics, "single", ["a", "b", "c"])["c"] is None


def test_failed_requests_and_gate_violations_unrank_and_are_named() -> None:
    plan = plan_rounds(["a", "b", "c"], 1)
    gate = ResolvedConfig(family="vllm", status="RESOLVED", cuda_graphs=False, gpu_offload=False)
    cells = [
        _cell("a", 1, 100.0, serve=_serve(100.0, failed=1)),
        _cell("b", 1, 90.0, config=gate),
        _cell("c", 1, 10.0),
    ]
    limits = cell_limitations(cells, plan.labels, "single")
    codes = {item.code for item in limits}
    assert {"failed_requests", "hard_gate_violation"} <= codes
    summary = summarize(plan, cells, mode="single", rounds_run=1, limitations=limits)
    ranked = {m.label for m in summary.metrics if m.ranked and m.bucket == "all"}
    assert ranked == {"c"}
    assert summary.best_engine == "c"
    assert "UNBALANCED" in summary.line


def test_every_cell_threat_is_named() -> None:
    labels = ["a", "b", "c"]
    odd = ResolvedConfig(
        family="vllm",
        status="SELF_REPORTED",
        attention_backend="XFORMERS",
        unknown_settings=["x"],
        warnings=["WARNING y"],
    )
    cells = [
        _cell(
            "a",
            1,
            100.0,
            stop=StopReport(signal="SIGKILL", group_gone=False, survivors=[42], exit_code=-9),
            memory=MemoryCheck(status="not returned", before_mib=0, after_mib=900, tolerance_mib=512),
            prefix_cache=PrefixCache(queries=10, hits=5, hit_rate=0.5, warning=True),
        ),
        _cell(
            "a",
            2,
            100.0,
            config=odd,
            memory=None,
            missing_env=["HF_HOME"],
            serve=_serve(100.0).model_copy(update={"client": HEALTHY.model_copy(update={"lagged": True})}),
        ),
        _cell("a", 3, 100.0, config=ResolvedConfig(attention_backend="FLASH_ATTN")),
        _cell("b", 1, 1.0, status="crashed", serve=None),
        _cell("c", 1, 100.0, serve=_serve(1.0).model_copy(update={"schedule_digest": "one"})),
        _cell("c", 2, 100.0, serve=_serve(1.0).model_copy(update={"schedule_digest": "two"})),
    ]
    codes = {item.code for item in cell_limitations(cells, labels, "load")}
    assert codes == {
        "failed_cells",
        "no_successful_round",
        "sigkill",
        "sigkill_survivors",
        "gpu_memory_not_returned",
        "gpu_memory_not_checked",
        "prefix_cache_hits",
        "self_reported_config",
        "unknown_settings",
        "engine_warnings",
        "attention_backend_changed",
        "unresolved_config",
        "client_lagged",
        "no_capacity",
        "differing_load_schedules",
        "inherited_env_missing",
    }


def test_plan_limitations() -> None:
    plan = plan_rounds(["a", "b", "c"], 1)
    adaptive = Adaptive(ci_target=0.02, min_rounds=6, max_rounds=12, stopped_at=6, outcome="target met")
    codes = [
        item.code
        for item in plan_limitations(
            plan,
            1,
            secret_env={"a": ["HF_TOKEN"], "b": []},
            extra_body={"stream": False, "ignore_eos": True},
            other_gpu_processes=[7],
            adaptive=adaptive,
        )
    ]
    assert codes == [
        "unbalanced_order",
        "few_rounds",
        "secret_env_values",
        "extra_request_body",
        "other_gpu_processes",
        "optional_stopping",
    ]
    assert (
        plan_limitations(
            plan_rounds(["a", "b"], 4),
            4,
            secret_env={},
            extra_body={},
            other_gpu_processes=None,
            adaptive=None,
        )
        == []
    )


def test_load_mode_uses_values_at_capacity() -> None:
    plan = plan_rounds(["a", "b"], 2)

    def load_cell(label: str, r: int, tps: float) -> CellResult:
        serve = _serve(1.0).model_copy(
            update={
                "mode": "load",
                "n_star": 4,
                "at_n_star": {"n_star": 4.0, "output_tps": tps, "ttft_ms": 5.0},
            }
        )
        return _cell(label, r, 1.0, serve=serve)

    cells = [
        load_cell("a", 1, 400.0),
        load_cell("a", 2, 420.0),
        load_cell("b", 1, 200.0),
        load_cell("b", 2, 210.0),
    ]
    summary = summarize(plan, cells, mode="load", rounds_run=2, limitations=[])
    assert {m.metric for m in summary.metrics} == {"n_star", "output_tps", "ttft_ms"}
    assert all(m.claim_class == "derived" for m in summary.metrics)
    assert summary.best_engine == "a"
    assert summary.headline_metric == "output_tps"


def test_the_ratio_n_is_the_paired_rounds_not_an_engines_own() -> None:
    from gco.bench.rounds.evidence import rounds_record
    from gco.bench.rounds.manifest import Workload

    plan = plan_rounds(["a", "b"], 4)
    cells = [_cell("a", r, 100.0 + r) for r in range(1, 5)] + [_cell("b", r, 50.0) for r in (1, 2)]
    cells += [_cell("b", r, 1.0, status="crashed", serve=None) for r in (3, 4)]
    summary = summarize(plan, cells, mode="single", rounds_run=4, limitations=[])
    b = next(m for m in summary.metrics if (m.label, m.bucket, m.metric) == ("b", "all", "decode_tps"))
    assert (b.ranked, b.ratio_n) == (True, 2)
    assert b.ratio_to_best == pytest.approx(50.0 / 101.5)  # a's median over rounds 1-2 only
    record = rounds_record(
        summary,
        engines=[],
        workload=Workload(),
        prompt_digest="d",
        gpu=None,
        serve_cmd=None,
        files=[],
        missing=[],
        cells=[],
    )
    ratios = {
        m.name: m for m in record.metrics if m.name.startswith("decode_tps_") and m.subject == "b/all / a"
    }
    # One name per statistic: the contract's ratio of medians keeps its name, the paired ratio has its own.
    assert {name: m.statistic for name, m in ratios.items()} == {
        "decode_tps_ratio_to_best": "ratio_of_medians",
        "decode_tps_paired_ratio_to_best": "median_of_paired_ratios",
    }
    assert ratios["decode_tps_ratio_to_best"].n == 2
    medians = {
        m.subject: m.n
        for m in record.metrics
        if m.name == "decode_tps" and m.statistic == "median_over_rounds"
    }
    assert (medians["a/all"], medians["b/all"]) == (4, 2)
    assert record.data["metric_definitions"]["metrics"]["decode_tps"]["unit"] == "tok/s"
