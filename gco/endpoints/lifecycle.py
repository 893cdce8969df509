"""Pure planners for the fenced record: a new lifecycle, Region membership changes, legacy back-fill.

They compute new field values from one snapshot; the store writes them conditioned on that
snapshot, so a concurrent change makes the write lose instead of being overwritten.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from gco.endpoints.record import DEFAULT_NAMESPACE, EndpointRecord, ingress_path_for


def ordered_union(*groups: Iterable[str]) -> list[str]:
    """Every item of every group once, in first-seen order."""
    seen: list[str] = []
    for group in groups:
        for item in group:
            if item not in seen:
                seen.append(item)
    return seen


@dataclass(frozen=True)
class RegionPlan:
    target_regions: list[str]
    cleanup_regions: list[str]
    region_generations: dict[str, str]
    joined: list[str]
    left: list[str]


def tokens_of(record: EndpointRecord) -> set[str]:
    """Every token the record holds or its statuses were fenced with: none may be minted again."""
    held = {record.lifecycle_id, record.deletion_generation, *record.region_generations.values()}
    for status in record.region_status.values():
        held.update((status.lifecycle_id, status.region_generation, status.deletion_generation))
    return {token for token in held if token}


def plan_create(
    name: str,
    spec: dict[str, Any],
    regions: list[str],
    mint: Callable[[Collection[str]], str],
    now: str,
    **fields: Any,
) -> dict[str, Any]:
    """The fields of a new lifecycle: deploying, a minted token per Region (none equal to another or
    to the lifecycle id), cleanup = targets; `fields` (namespace, labels, created_by, ...) as given."""
    lifecycle = mint(())
    generations: dict[str, str] = {}
    for region in regions:
        generations[region] = mint({lifecycle, *generations.values()})
    return {
        "endpoint_name": name,
        "lifecycle_id": lifecycle,
        "desired_state": "deploying",
        "target_regions": regions,
        "cleanup_regions": list(regions),
        "region_generations": generations,
        "spec": spec,
        "ingress_path": ingress_path_for(name),
        "created_at": now,
        "updated_at": now,
        "region_status": {},
        **fields,
    }


def plan_target_regions(
    snapshot: EndpointRecord,
    targets: list[str],
    cleanup: Iterable[str],
    mint: Callable[[Collection[str]], str],
) -> RegionPlan:
    """New membership for a record.

    cleanup_regions only grows within a lifecycle (history, request and targets). A Region that
    joins gets a token minted now, never one the record holds or was fenced with, even if it was
    a member before, so an acknowledgement written for an earlier membership can never suppress
    cleanup of the current one. Callers cannot propose tokens.
    """
    current = snapshot.target_regions
    joined = [region for region in targets if region not in current]
    left = [region for region in current if region not in targets]
    generations = dict(snapshot.region_generations)
    taken = tokens_of(snapshot)
    for region in joined:
        generations[region] = mint(taken)
        taken.add(generations[region])
    return RegionPlan(
        target_regions=list(targets),
        cleanup_regions=ordered_union(snapshot.cleanup_regions, cleanup, targets),
        region_generations=generations,
        joined=joined,
        left=left,
    )


def plan_backfill(snapshot: EndpointRecord, new_token: Callable[[], str], now: str) -> dict[str, object]:
    """Fields that turn a legacy record into a fenced one; existing tokens are kept.

    The cleanup set is the union of cleanup, targets and every Region that reported status,
    so no Region the old writer touched escapes cleanup.
    """
    cleanup = ordered_union(snapshot.cleanup_regions, snapshot.target_regions, snapshot.region_status)
    generations = dict(snapshot.region_generations)
    for region in cleanup:
        generations.setdefault(region, new_token())
    fields: dict[str, object] = {
        "lifecycle_id": new_token(),
        "cleanup_regions": cleanup,
        "region_generations": generations,
        "namespace": snapshot.namespace or DEFAULT_NAMESPACE,
        "ingress_path": snapshot.ingress_path or ingress_path_for(snapshot.endpoint_name),
        "created_at": snapshot.created_at or snapshot.updated_at or now,
        "updated_at": now,
    }
    if snapshot.is_deleted and snapshot.deletion_generation is None:
        fields["deletion_generation"] = new_token()
        fields["deletion_regions"] = cleanup
    return fields
