"""The rollout's evidence record (kind `rollout`): every Region's blocks, looks and verdict.

Written after every step that measured or decided something, so an execution that dies still leaves
what it had measured. The record's metrics are each analysed Region's headline ratios (canary over
primary, the bench's `ratio_of_medians`) with their plain 95% paired-bootstrap interval; the interval
the rule read (at the corrected per-look level) is in `data`, beside each block's values, which
`data.series` also holds in the shape the report page draws per round (a block is the rollout's round).
"""

from __future__ import annotations

from typing import Any

from gco.bench.analysis.stats import ratio_of_medians
from gco.evidence.record import RATIO_OF_MEDIANS, EvidenceRecord, LimitationEntry, Metric, now_iso
from gco.rollout.decision import METRICS, pairs
from gco.rollout.state import RegionAnalysis, RolloutState

KIND = "rollout"
RATIO_SUFFIX = "_ratio_canary_to_primary"


def _metrics(region: RegionAnalysis) -> list[Metric]:
    found: list[Metric] = []
    for metric in METRICS:
        canary, primary = pairs(region.blocks, metric)
        if len(canary) < 2:
            continue
        estimate = ratio_of_medians(canary, primary)
        interval = None if estimate.lo is None or estimate.hi is None else (estimate.lo, estimate.hi)
        found.append(
            Metric(
                name=f"{metric}{RATIO_SUFFIX}",
                value=estimate.value,
                unit="ratio",
                statistic=RATIO_OF_MEDIANS,
                n=estimate.n,
                ci95=interval,
                subject=region.region,
            )
        )
    return found


def _series(state: RolloutState) -> list[dict[str, Any]]:
    """Each block's value per Region, version and metric, in the shape the report page draws per round
    (`gco.evidence.page`: label, bucket, metric, per_round): a block is the rollout's round."""
    series: list[dict[str, Any]] = []
    for region in state.regions:
        for metric in METRICS:
            for version in ("primary", "canary"):
                values = {
                    str(index): value
                    for index, block in enumerate(region.blocks, start=1)
                    if (value := getattr(block, version).value(metric)) is not None
                }
                if values:
                    series.append(
                        {"label": version, "bucket": region.region, "metric": metric, "per_round": values}
                    )
    return series


def rollout_record(state: RolloutState, created_at: str | None = None) -> EvidenceRecord:
    """The sealed evidence record of `state` as it stands."""
    settings = state.settings
    status = state.outcome or "under way"
    summary = f"{settings.endpoint}: {settings.image} over {state.primary_image}: {status}"
    if state.reason:
        summary += f" ({state.reason})"
    identity: dict[str, Any] = {
        "endpoint": settings.endpoint,
        "lifecycle_id": state.lifecycle_id,
        "primary_image": state.primary_image,
        "canary_image": settings.image,
        "regions": [region.region for region in state.regions],
        "started_at": state.started_at,
    }
    data: dict[str, Any] = {
        "settings": settings.model_dump(mode="json"),
        "look_level": settings.rule.level,
        "outcome": state.outcome,
        "reason": state.reason,
        "regions": [region.model_dump(mode="json") for region in state.regions],
        "series": _series(state),
    }
    limitations = [
        LimitationEntry(
            code="analysis-traffic",
            text="The verdict rests on the rollout's own analysis requests (one prompt, pinned to each "
            "version), not on the endpoint's other traffic.",
        )
    ]
    untouched = [region.region for region in state.regions if region.phase == "pending"]
    if state.done and untouched:
        limitations.append(
            LimitationEntry(code="regions-untouched", text=f"Never given the canary: {', '.join(untouched)}.")
        )
    record = EvidenceRecord(
        kind=KIND,
        claim_class="observed",
        summary=summary,
        created_at=created_at or now_iso(),
        identity=identity,
        metrics=[metric for region in state.regions for metric in _metrics(region)],
        limitations=limitations,
        data=data,
    )
    return record.sealed()
