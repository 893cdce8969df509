"""What `list` and `status` print about what runs: observed states, per Region and in aggregate, and
the canary. Pure functions of a record (`gco.endpoints.observed_state`), kept apart from the commands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gco.endpoints import observed_state
from gco.endpoints.observed_state import CANARY_DESIRED, CANARY_READY
from gco.endpoints.record import EndpointRecord

LIST_HEADERS = ("NAME", "DESIRED", "OBSERVED", "REGIONS", "READY", "CANARY", "IMAGE", "CREATED")
REGION_HEADERS = ("REGION", "ROLE", "STATE", "OBSERVED", "READY", "CANARY", "ERROR")


Stale = Mapping[str, str]  # Region -> why its observation is stale (`ReconcilerWatch.stale`)


def observed_json(record: EndpointRecord, stale: Stale | None = None) -> dict[str, Any]:
    """The observed aggregate and each Region's, for `--output json` (beside the record's fields,
    whose `desired_state` stays as stored; `desired_shown` is how `list` and `status` read it)."""
    total = observed_state.aggregate(record, stale)
    return {
        "desired_shown": observed_state.desired_shown(record),
        "state": total.state,
        "ready": total.ready,
        "desired": total.desired,
        "reason": total.reason or None,
        "regions": {
            region: {"state": o.state, "ready": o.ready, "desired": o.desired, "reason": o.reason or None}
            for region, o in observed_state.per_region(record, stale).items()
        },
    }


def canary_ready(record: EndpointRecord, region: str) -> str:
    """`ready/desired` of the canary in a Region as its reconciler last counted it, or `-`."""
    status = record.region_status.get(region)
    extra = (status.model_extra or {}) if status is not None else {}
    if record.spec.canary is None or extra.get(CANARY_READY) is None:
        return "-"
    return f"{extra[CANARY_READY]}/{extra.get(CANARY_DESIRED, '?')}"


def canary_summary(record: EndpointRecord) -> str:
    """`IMAGE 30% x1` for a record with a canary, `-` without."""
    canary = record.spec.canary
    if canary is None:
        return "-"
    return f"{canary.image} {canary.weight}% x{canary.replicas}"


def canary_line(record: EndpointRecord) -> str | None:
    """One line on the canary for `status`: image, weight, replicas, and ready per target Region."""
    if record.spec.canary is None:
        return None
    ready = ", ".join(f"{region} {canary_ready(record, region)}" for region in record.target_regions)
    return f"canary:        {canary_summary(record)} (ready: {ready})"


def region_rows(record: EndpointRecord, stale: Stale | None = None) -> list[list[str]]:
    """`status`'s table: each Region the record was ever in, what its reconciler reported and what
    that means (`observed`; a removed Region reads `deleting` until cleaned, a stale one `stale`)."""
    regions = observed_state.per_region(record, stale)
    rows = []
    for region in record.cleanup_regions:
        status = record.region_status.get(region)
        seen = regions.get(region) or observed_state.in_region(record, region, stale)
        rows.append(
            [
                region,
                "target" if region in record.target_regions else "cleanup",
                status.state if status else "pending",
                seen.state,
                f"{status.replicas_ready}/{status.replicas_desired}" if status else "-",
                canary_ready(record, region),
                seen.reason
                if seen.state == "stale"
                else observed_state.region_note(status)
                if status
                else "",
            ]
        )
    return rows


def list_rows(records: Sequence[EndpointRecord], stale: Mapping[str, Stale] | None = None) -> list[list[Any]]:
    """`list`'s table: desired (as `observed_state.desired_shown` reads it) and observed state, each
    Region's observed state, the canary; `stale` is per endpoint name."""
    rows = []
    for record in records:
        old = (stale or {}).get(record.endpoint_name)
        total = observed_state.aggregate(record, old)
        seen = observed_state.per_region(record, old)
        regions = ", ".join(f"{region} {o.state}" for region, o in seen.items())
        rows.append(
            [
                record.endpoint_name,
                observed_state.desired_shown(record),
                total.state,
                regions or "-",
                f"{total.ready}/{total.desired}",
                canary_summary(record),
                record.spec.image,
                record.created_at or "-",
            ]
        )
    return rows


def admission_lines(record: EndpointRecord) -> list[str]:
    """`status`'s `admitted:` lines: per target Region and role, what let its image in (the evidence
    id, or the reason with who and when); none for a record never admitted under a policy."""
    lines = []
    for region in record.target_regions:
        for role, entry in sorted(record.admissions.get(region, {}).items()):
            digest = entry.digest[:19] if entry.digest else "digest unknown"
            if entry.evidence_id:
                why = f"validated by evidence {entry.evidence_id}"
            elif entry.reason:
                why = f"unvalidated, allowed by {entry.by} at {entry.at}: {entry.reason!r}"
            else:
                why = f"unvalidated, warned ({entry.by} at {entry.at})"
            lines.append(f"admitted:      {region} {role} {entry.image} ({digest}): {why}")
    return lines
