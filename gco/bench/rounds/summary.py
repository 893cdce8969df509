"""Summarize a rounds run: medians over rounds with CIs, ratios to the best engine, the summary line.

The ratio to the best engine is the ratio of medians over the rounds both engines have (`ratio_to_best`,
n = those pairs, paired bootstrap CI); the median of the per-round ratios is kept beside it
(`paired_ratio_median`).

Pure functions of the plan and the cell results; no I/O. The limitations are read in `limitations`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gco.bench.analysis.stats import Estimate, median_ci, paired_ratio_ci, ratio_of_medians
from gco.bench.clients.records import (
    HIGHER_IS_BETTER,
    METRICS_CLIP,
    METRICS_LOAD,
    METRICS_SINGLE,
    UNITS,
    Mode,
)
from gco.bench.rounds.cell import CellResult
from gco.bench.rounds.williams import RoundPlan

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
    ratio_n: int | None = None
    paired_ratio_median: float | None = None
    paired_ratio_ci95: tuple[float, float] | None = None


class AdaptiveCheck(BaseModel):
    """One look of the adaptive rule at a whole Williams period: each engine's ratio CI half-width."""

    model_config = ConfigDict(frozen=True)

    round: int
    half_widths: dict[str, float | None]
    met: bool


class Adaptive(BaseModel):
    """The optional-stopping rule, every check it made, and how it ended."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ci_target: float
    min_rounds: int
    max_rounds: int
    stopped_at: int | None = None
    outcome: Literal["target met", "maximum reached", "not run"] = "not run"
    checks: list[AdaptiveCheck] = Field(default_factory=list)


class Summary(BaseModel):
    """The whole run's statistics, limitations and summary line."""

    model_config = ConfigDict(extra="forbid")

    mode: Mode
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
    claim_class: ClaimClass = "observed"
    extra_body_fields: list[str] = Field(default_factory=list)
    line: str = ""

    def with_line(self) -> Summary:
        """A copy carrying its one-line verdict."""
        return self.model_copy(update={"line": summary_line(self)})


HEADLINE = {"single": "decode_tps", "load": "output_tps", "clip": "clips_per_min"}


def headline_metric(mode: str) -> str:
    """The metric that ranks engines: decode tok/s (single), output tok/s at N* (load), clips/min (clip)."""
    return HEADLINE[mode]


def claim_class(mode: str) -> ClaimClass:
    """Medians of client timings are observed (single, clip); load values come from a model of N*: derived."""
    return "derived" if mode == "load" else "observed"


def _cell_values(cell: CellResult, mode: str) -> dict[tuple[str, str], float]:
    if cell.status != "ok":
        return {}
    if mode == "clip":
        if cell.clip is None:
            return {}
        groups = cell.clip.shapes
        return {(b, m): v for b, values in groups.items() for m, v in values.items() if m in METRICS_CLIP}
    if cell.serve is None:
        return {}
    if mode == "load":
        return {("all", m): v for m, v in cell.serve.at_n_star.items() if m in METRICS_LOAD}
    return {
        (b, m): v
        for b, values in cell.serve.buckets.items()
        for m, v in values.items()
        if m in METRICS_SINGLE
    }


def failures(cell: CellResult) -> dict[str, tuple[int, int]]:
    """Per bucket (or clip shape): (failed, sent) requests of a cell that measured anything."""
    if cell.clip is not None:
        counts = {b: int(v.get("clips", 0)) for b, v in cell.clip.shapes.items()}
        failed = cell.clip.failed_by_shape
    elif cell.serve is not None:
        counts = {b: int(v.get("requests", 0)) for b, v in cell.serve.buckets.items()}
        failed = cell.serve.failed_by_bucket
    else:
        return {}
    return {b: (failed.get(b, 0), ok + failed.get(b, 0)) for b, ok in counts.items()}


def failed_request_pairs(cells: Sequence[CellResult]) -> set[tuple[str, str]]:
    """(label, bucket) pairs where any request (or clip) failed in any round."""
    return {(c.label, b) for c in cells for b, (failed, _) in failures(c).items() if failed > 0}


def gated_pairs(cells: Sequence[CellResult]) -> set[tuple[str, str]]:
    """(label, bucket) pairs of every engine whose log shows a hard-gate violation in any round."""
    gated = {c.label for c in cells if c.config.gate_violations}
    buckets = {b for c in cells for b in failures(c)} | {"all"}
    return {(label, b) for label in gated for b in buckets}


def _unranked(cells: Sequence[CellResult], mode: str) -> set[tuple[str, str]]:
    """(label, bucket) pairs not ranked: a hard-gate violation, or failed requests there (not in load mode,
    where the values at N* come only from levels without a failure)."""
    out = gated_pairs(cells)
    if mode != "load":
        out |= failed_request_pairs(cells)
    return out


def metric_summaries(cells: Sequence[CellResult], labels: Sequence[str], mode: str) -> list[MetricSummary]:
    """Per engine x bucket x metric medians with CIs, then paired ratio CIs against the best ranked engine."""
    per: dict[tuple[str, str, str], dict[int, float]] = {}
    for cell in cells:
        for (bucket, metric), value in _cell_values(cell, mode).items():
            per.setdefault((cell.label, bucket, metric), {})[cell.round] = value
    unranked = _unranked(cells, mode)
    claim = claim_class(mode)
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
            _set_ratios(item, best, common)
    return out


def _ci(estimate: Estimate) -> tuple[float, float] | None:
    return (estimate.lo, estimate.hi) if estimate.lo is not None and estimate.hi is not None else None


def _set_ratios(item: MetricSummary, best: MetricSummary, rounds: Sequence[int]) -> None:
    """The ratio of medians over the paired rounds, and the median of the per-round ratios, to `best`."""
    mine, theirs = [item.per_round[r] for r in rounds], [best.per_round[r] for r in rounds]
    ratio, paired = ratio_of_medians(mine, theirs), paired_ratio_ci(mine, theirs)
    item.best_label = best.label
    item.ratio_to_best, item.ratio_ci95, item.ratio_n = ratio.value, _ci(ratio), ratio.n
    item.paired_ratio_median, item.paired_ratio_ci95 = paired.value, _ci(paired)


def ratio_half_widths(
    metrics: Sequence[MetricSummary], mode: str, labels: Sequence[str]
) -> dict[str, float | None]:
    """Relative half-width of every engine's headline ratio CI (bucket `all`); the adaptive rule reads this.

    An engine with no ranked headline ratio (no value yet, failures, a hard gate) has None: the rule asks
    for every engine's interval, so such an engine keeps the run going to its maximum.
    """
    widths: dict[str, float | None] = dict.fromkeys(labels)
    head = headline_metric(mode)
    for item in metrics:
        ratio, ci = item.ratio_to_best, item.ratio_ci95
        if item.bucket == "all" and item.metric == head and item.ranked and ratio and ci is not None:
            widths[item.label] = (ci[1] - ci[0]) / 2 / ratio
    return widths


def summarize(
    plan: RoundPlan,
    cells: Sequence[CellResult],
    *,
    mode: Mode,
    rounds_run: int,
    limitations: Sequence[Limitation],
    adaptive: Adaptive | None = None,
    extra_body: Mapping[str, Any] | None = None,
) -> Summary:
    """The run's summary: statistics, every limitation, and the one-line verdict."""
    labels = list(plan.labels)
    metrics = metric_summaries(cells, labels, mode)
    statuses = Counter(cell.status for cell in cells)
    head = headline_metric(mode)
    heads = [m for m in metrics if m.bucket == "all" and m.metric == head and m.ranked]
    best = next((m for m in heads if m.best_label == m.label), None)
    balanced = plan.balanced and rounds_run % plan.period == 0
    return Summary(
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
        claim_class=claim_class(mode),
        extra_body_fields=sorted(extra_body or {}),
    ).with_line()


def summary_line(s: Summary) -> str:
    """Engines x rounds, cells ok, balance, adaptive outcome, the best engine's headline value and whether it
    is observed or derived, and the extra request body every engine was sent (its field names)."""
    adaptive = f"adaptive: {s.adaptive.outcome} at {s.adaptive.stopped_at}" if s.adaptive else "adaptive: off"
    if s.best_engine and s.headline_value is not None:
        unit = UNITS.get(s.headline_metric, "")
        best = f"best {s.best_engine} {s.headline_metric} {s.headline_value:.1f} {unit} ({s.claim_class})"
    else:
        best = "no engine ranked"
    extra = (
        f"extra request body: {', '.join(s.extra_body_fields)}"
        if s.extra_body_fields
        else "no extra request body"
    )
    order = "balanced" if s.balanced else "UNBALANCED"
    return (
        f"{len(s.engines)} engines x {s.rounds_run} rounds ({s.mode}), "
        f"{s.cells_ok}/{s.cells_total} cells ok, "
        f"{order} Williams order, {adaptive}; {best}; {extra}".strip()
    )
