"""Summarize a rounds run: medians over rounds with CIs, paired ratios to the best engine, limitations.

Pure functions of the plan and the cell results; no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gco.bench.cell import CellResult
from gco.bench.records import HIGHER_IS_BETTER, METRICS_LOAD, METRICS_SINGLE, UNITS
from gco.bench.stats import median_ci, paired_ratio_ci
from gco.bench.williams import RoundPlan

ClaimClass = Literal["observed", "derived"]


class Limitation(BaseModel):
    """A named threat to the result's validity, with what it concerns."""

    model_config = ConfigDict(frozen=True)

    code: str
    text: str


class MetricSummary(BaseModel):
    """One engine x bucket x metric: the median over rounds and its ratio to the best engine."""

    model_config = ConfigDict(extra="forbid")

    label: str
    bucket: str
    metric: str
    unit: str
    claim_class: ClaimClass
    per_round: dict[int, float]
    median: float
    ci95: tuple[float, float] | None
    n: int
    ranked: bool
    best_label: str | None = None
    ratio_to_best: float | None = None
    ratio_ci95: tuple[float, float] | None = None


class Adaptive(BaseModel):
    """The optional-stopping rule and how it ended."""

    model_config = ConfigDict(extra="forbid")

    ci_target: float
    min_rounds: int
    max_rounds: int
    stopped_at: int | None = None
    outcome: Literal["target met", "maximum reached", "not run"] = "not run"


class Summary(BaseModel):
    """The whole run's statistics, limitations and summary line."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["single", "load"]
    engines: list[str]
    rounds_planned: int
    rounds_run: int
    period: int
    balanced: bool
    cells_total: int
    cells_ok: int
    cells_by_status: dict[str, int]
    adaptive: Adaptive | None = None
    metrics: list[MetricSummary] = Field(default_factory=list)
    limitations: list[Limitation] = Field(default_factory=list)
    best_engine: str | None = None
    headline_metric: str
    headline_value: float | None = None
    line: str = ""


def headline_metric(mode: str) -> str:
    """The metric that ranks engines: decode tok/s (single) or output tok/s at N* (load)."""
    return "decode_tps" if mode == "single" else "output_tps"


def _cell_values(cell: CellResult, mode: str) -> dict[tuple[str, str], float]:
    if cell.status != "ok" or cell.serve is None:
        return {}
    if mode == "load":
        return {("all", m): v for m, v in cell.serve.at_n_star.items() if m in METRICS_LOAD}
    return {
        (b, m): v
        for b, values in cell.serve.buckets.items()
        for m, v in values.items()
        if m in METRICS_SINGLE
    }


def _unranked(cells: Sequence[CellResult], mode: str) -> set[tuple[str, str]]:
    """(label, bucket) pairs not ranked: failed requests there (single mode), or any hard-gate violation."""
    gated = {c.label for c in cells if c.config.gate_violations}
    buckets = {b for c in cells if c.serve for b in c.serve.buckets} | {"all"}
    out = {(label, b) for label in gated for b in buckets}
    if mode == "single":
        out |= {(c.label, b) for c in cells if c.serve for b, n in c.serve.failed_by_bucket.items() if n > 0}
    return out


def metric_summaries(cells: Sequence[CellResult], labels: Sequence[str], mode: str) -> list[MetricSummary]:
    """Per engine x bucket x metric medians with CIs, then paired ratio CIs against the best ranked engine."""
    per: dict[tuple[str, str, str], dict[int, float]] = {}
    for cell in cells:
        for (bucket, metric), value in _cell_values(cell, mode).items():
            per.setdefault((cell.label, bucket, metric), {})[cell.round] = value
    unranked = _unranked(cells, mode)
    claim: ClaimClass = "observed" if mode == "single" else "derived"
    out: list[MetricSummary] = []
    for (label, bucket, metric), rounds in sorted(per.items()):
        estimate = median_ci(list(rounds.values()))
        ci = (estimate.lo, estimate.hi) if estimate.lo is not None and estimate.hi is not None else None
        out.append(
            MetricSummary(
                label=label,
                bucket=bucket,
                metric=metric,
                unit=UNITS.get(metric, ""),
                claim_class=claim,
                per_round=rounds,
                median=estimate.value,
                ci95=ci,
                n=estimate.n,
                ranked=(label, bucket) not in unranked and label in labels,
            )
        )
    groups: dict[tuple[str, str], list[MetricSummary]] = {}
    for item in out:
        groups.setdefault((item.bucket, item.metric), []).append(item)
    for (_, metric), items in groups.items():
        ranked = [i for i in items if i.ranked and i.median > 0]
        if not ranked:
            continue
        pick = max if HIGHER_IS_BETTER.get(metric, False) else min
        best = pick(ranked, key=lambda i: i.median)
        for item in ranked:
            common = sorted(set(item.per_round) & set(best.per_round))
            if not common:
                continue
            ratio = paired_ratio_ci([item.per_round[r] for r in common], [best.per_round[r] for r in common])
            item.best_label = best.label
            item.ratio_to_best = ratio.value
            item.ratio_ci95 = (ratio.lo, ratio.hi) if ratio.lo is not None and ratio.hi is not None else None
    return out


def ratio_half_widths(metrics: Sequence[MetricSummary], mode: str) -> dict[str, float | None]:
    """Relative half-width of each engine's headline ratio CI (bucket `all`); the adaptive rule reads this."""
    widths: dict[str, float | None] = {}
    for item in metrics:
        if item.bucket == "all" and item.metric == headline_metric(mode) and item.ranked:
            if item.ratio_ci95 is None or not item.ratio_to_best:
                widths[item.label] = None
            else:
                widths[item.label] = (item.ratio_ci95[1] - item.ratio_ci95[0]) / 2 / item.ratio_to_best
    return widths


def summarize(
    plan: RoundPlan,
    cells: Sequence[CellResult],
    *,
    mode: Literal["single", "load"],
    rounds_run: int,
    limitations: Sequence[Limitation],
    adaptive: Adaptive | None = None,
) -> Summary:
    """The run's summary: statistics, every limitation, and the one-line verdict."""
    labels = list(plan.labels)
    metrics = metric_summaries(cells, labels, mode)
    statuses = Counter(cell.status for cell in cells)
    head = headline_metric(mode)
    heads = [m for m in metrics if m.bucket == "all" and m.metric == head and m.ranked]
    best = next((m for m in heads if m.best_label == m.label), None)
    balanced = plan.balanced and rounds_run % plan.period == 0
    summary = Summary(
        mode=mode,
        engines=labels,
        rounds_planned=len(plan.rounds),
        rounds_run=rounds_run,
        period=plan.period,
        balanced=balanced,
        cells_total=len(cells),
        cells_ok=statuses.get("ok", 0),
        cells_by_status=dict(statuses),
        adaptive=adaptive,
        metrics=metrics,
        limitations=list(limitations),
        best_engine=best.label if best else None,
        headline_metric=head,
        headline_value=best.median if best else None,
    )
    summary.line = summary_line(summary)
    return summary


def summary_line(s: Summary) -> str:
    """Engines x rounds, cells ok, balance, adaptive outcome, and the best engine's headline value."""
    adaptive = f"adaptive: {s.adaptive.outcome} at {s.adaptive.stopped_at}" if s.adaptive else "adaptive: off"
    if s.best_engine and s.headline_value is not None:
        unit = UNITS.get(s.headline_metric, "")
        best = f"best {s.best_engine} {s.headline_metric} {s.headline_value:.1f} {unit}"
    else:
        best = "no engine ranked"
    order = "balanced" if s.balanced else "UNBALANCED"
    return (
        f"{len(s.engines)} engines x {s.rounds_run} rounds ({s.mode}), "
        f"{s.cells_ok}/{s.cells_total} cells ok, "
        f"{order} Williams order, {adaptive}; {best}".strip()
    )


def cell_limitations(cells: Sequence[CellResult], labels: Sequence[str], mode: str) -> list[Limitation]:
    """Limitations read from the cells: failures, stops, GPU memory, configuration, cache, client lag."""
    out: list[Limitation] = []
    add = out.append
    failed = Counter(c.status for c in cells if c.status != "ok")
    for status, count in sorted(failed.items()):
        add(Limitation(code="failed_cells", text=f"{count} cell(s) failed with status {status}"))
    for label in labels:
        if not any(c.label == label and c.status == "ok" for c in cells):
            add(Limitation(code="no_successful_round", text=f"{label}: no successful round"))
    if mode == "single":
        for label, bucket in sorted(_unranked(cells, mode)):
            add(
                Limitation(
                    code="failed_requests", text=f"{label}/{bucket}: failed requests; not ranked there"
                )
            )
    _stop_limitations(cells, add)
    _config_limitations(cells, add)
    for c in cells:
        if c.prefix_cache is not None and c.prefix_cache.warning:
            add(
                Limitation(
                    code="prefix_cache_hits",
                    text=f"{c.label} round {c.round}: prefix-cache hit rate {c.prefix_cache.hit_rate:.1%}",
                )
            )
        if c.serve is not None and c.serve.client.lagged:
            add(
                Limitation(
                    code="client_lagged",
                    text=f"{c.label} round {c.round}: client schedule delay p99 "
                    f"{c.serve.client.lag_p99_ms:.1f} ms",
                )
            )
        if mode == "load" and c.status == "ok" and c.serve is not None and c.serve.n_star is None:
            add(
                Limitation(code="no_capacity", text=f"{c.label} round {c.round}: no load level was sustained")
            )
    digests = {c.serve.schedule_digest for c in cells if c.serve is not None and c.serve.schedule_digest}
    if len(digests) > 1:
        add(Limitation(code="differing_load_schedules", text=f"{len(digests)} different load schedules"))
    missing = sorted({f"{c.label}:{name}" for c in cells for name in c.missing_env})
    if missing:
        add(
            Limitation(
                code="inherited_env_missing",
                text=f"inherited env not set by the caller: {', '.join(missing)}",
            )
        )
    return out


def _stop_limitations(cells: Sequence[CellResult], add: Callable[[Limitation], None]) -> None:
    for c in cells:
        where = f"{c.label} round {c.round}"
        if c.stop is not None and c.stop.signal == "SIGKILL":
            add(Limitation(code="sigkill", text=f"{where}: did not stop on SIGTERM; SIGKILL sent"))
        if c.stop is not None and (c.stop.survivors or not c.stop.group_gone):
            add(
                Limitation(
                    code="sigkill_survivors",
                    text=f"{where}: processes survived the group stop {c.stop.survivors} (killed by pid)",
                )
            )
        if c.memory is not None and c.memory.status == "not returned":
            add(
                Limitation(
                    code="gpu_memory_not_returned",
                    text=f"{where}: GPU memory {c.memory.after_mib:.0f} MiB, "
                    f"{c.memory.before_mib:.0f} MiB before launch",
                )
            )
    if any(c.memory is None or c.memory.status == "not checked" for c in cells):
        add(
            Limitation(code="gpu_memory_not_checked", text="GPU memory return not checked (NVML unavailable)")
        )


def _config_limitations(cells: Sequence[CellResult], add: Callable[[Limitation], None]) -> None:
    backends: dict[str, set[str]] = {}
    seen: set[tuple[str, str]] = set()

    def once(code: str, label: str, text: str) -> None:
        if (code, label + text) not in seen:
            seen.add((code, label + text))
            add(Limitation(code=code, text=f"{label}: {text}"))

    for c in cells:
        cfg = c.config
        if cfg.status in ("UNPROVEN", "PARTIAL"):
            once("unresolved_config", c.label, f"configuration {cfg.status}")
        if cfg.status == "SELF_REPORTED":
            once("self_reported_config", c.label, "configuration only self-reported")
        for gate in cfg.gate_violations:
            once("hard_gate_violation", c.label, f"{gate}; not ranked")
        if cfg.unknown_settings:
            once("unknown_settings", c.label, ", ".join(sorted(set(cfg.unknown_settings))))
        if cfg.warnings:
            once("engine_warnings", c.label, f"{len(cfg.warnings)} warning line(s) in the log")
        if cfg.attention_backend:
            backends.setdefault(c.label, set()).add(cfg.attention_backend)
    for label, names in sorted(backends.items()):
        if len(names) > 1:
            add(Limitation(code="attention_backend_changed", text=f"{label}: {', '.join(sorted(names))}"))


def plan_limitations(
    plan: RoundPlan,
    rounds_run: int,
    *,
    secret_env: Mapping[str, list[str]],
    extra_body: bool,
    other_gpu_processes: list[int] | None,
    adaptive: Adaptive | None,
) -> list[Limitation]:
    """Limitations of the design and the inputs, known before any engine runs (and after adaptive stop)."""
    out = []
    if rounds_run % plan.period != 0:
        out.append(
            Limitation(
                code="unbalanced_order",
                text=f"{rounds_run} rounds is not a multiple of the Williams period {plan.period}",
            )
        )
    if rounds_run < 2:
        out.append(Limitation(code="few_rounds", text=f"{rounds_run} round(s): no interval across rounds"))
    for label, names in sorted(secret_env.items()):
        if names:
            out.append(
                Limitation(
                    code="secret_env_values",
                    text=f"{label}: secret-looking env values written in the manifest: {', '.join(names)}",
                )
            )
    if extra_body:
        out.append(Limitation(code="extra_request_body", text="an extra request body went to every engine"))
    if other_gpu_processes:
        out.append(
            Limitation(code="other_gpu_processes", text=f"GPU processes at start: {other_gpu_processes}")
        )
    if adaptive is not None:
        out.append(
            Limitation(
                code="optional_stopping",
                text=f"adaptive stop (CI half-width <= {adaptive.ci_target:g}, rounds "
                f"{adaptive.min_rounds}..{adaptive.max_rounds}): {adaptive.outcome}",
            )
        )
    return out
