"""The ConditionExpression of every store write, clause by clause: the record's fencing.

Pure: each function adds labelled clauses to an `Expression` and nothing else. The labels are
the vocabulary of docs/fencing.md (what each clause stops) and of the mutation checks, which
drop one clause at a time and expect a test to notice (`make mutation-conditions`).
"""

from __future__ import annotations

from gco.endpoints.expressions import Expression

DELETED = "deleted"
STOPPED = "stopped"
LIVE = ("deploying", "running")


def create(e: Expression) -> None:
    """A new record: the name is free (a deleted record awaiting purge still holds it)."""
    e.missing("create.absent", "endpoint_name")


def backfill(e: Expression, updated_at: str | None) -> None:
    """A legacy record, unchanged since the snapshot the back-fill was planned from."""
    e.exists("backfill.exists", "endpoint_name")
    e.missing("backfill.legacy", "lifecycle_id")
    if updated_at is None:
        e.missing("backfill.snapshot", "updated_at")
    else:
        e.equals("backfill.snapshot", updated_at, "updated_at")


def desired_state(
    e: Expression,
    state: str,
    lifecycle_id: str | None,
    expected_state: str | None,
    label: tuple[str, str] | None,
) -> None:
    """An operator's move of desired_state, fenced by what the operator pinned."""
    e.exists("desired.exists", "endpoint_name")
    if lifecycle_id is not None:
        e.equals("desired.lifecycle", lifecycle_id, "lifecycle_id")
    if expected_state is not None:
        e.equals("desired.expected_state", expected_state, "desired_state")
    if label is not None:
        e.equals("desired.label", label[1], "labels", label[0])
    e.differs("desired.not_deleted", DELETED, "desired_state")
    if state == DELETED:
        e.exists("desired.fenced_record", "lifecycle_id")


def start(e: Expression, lifecycle_id: str) -> None:
    """stopped -> running, of the operator's lifecycle only."""
    e.exists("start.exists", "endpoint_name")
    e.equals("start.stopped", "stopped", "desired_state")
    e.equals("start.lifecycle", lifecycle_id, "lifecycle_id")


def live(e: Expression, lifecycle_id: str, updated_at: str | None) -> None:
    """A spec or Region change: the operator's lifecycle, not deleted, and its snapshot."""
    e.exists("live.exists", "endpoint_name")
    e.equals("live.lifecycle", lifecycle_id, "lifecycle_id")
    e.differs("live.not_deleted", DELETED, "desired_state")
    if updated_at is not None:
        e.equals("live.snapshot", updated_at, "updated_at")


def spec_change(e: Expression, stopped: bool) -> None:
    """A spec change keeps the desired state it was planned for: one planned for a stopped endpoint
    lands only while it is stopped (and leaves it stopped), any other only while it is not (and
    sets deploying), so a stop between the read and the write is never undone."""
    if stopped:
        e.equals("spec.stopped", STOPPED, "desired_state")
    else:
        e.differs("spec.not_stopped", STOPPED, "desired_state")


def scale(e: Expression, lifecycle_id: str) -> None:
    """Replicas of a live, non-mooncake, non-autoscaled endpoint of the operator's lifecycle."""
    e.exists("scale.exists", "endpoint_name")
    e.equals("scale.lifecycle", lifecycle_id, "lifecycle_id")
    state = e.path("desired_state")
    e.require("scale.live", f"{state} IN ({e.value(LIVE[0])}, {e.value(LIVE[1])})")
    e.missing("scale.no_mooncake", "spec", "mooncake")
    enabled = e.path("spec", "autoscaling", "enabled")
    e.require("scale.not_autoscaled", f"attribute_not_exists({enabled}) OR {enabled} = {e.value(False)}")


def observation(e: Expression, region: str, lifecycle_id: str, region_generation: str) -> None:
    """An ordinary Region status: its lifecycle and its current membership token, never deleted."""
    e.exists("status.exists", "endpoint_name")
    e.equals("status.lifecycle", lifecycle_id, "lifecycle_id")
    e.equals("status.region_generation", region_generation, "region_generations", region)
    e.differs("status.not_deleted", DELETED, "desired_state")
    e.contains("status.member", region, "cleanup_regions")


def acknowledgement(e: Expression, region: str, generation: str, lifecycle_id: str | None) -> None:
    """A deletion acknowledgement: the current deletion generation, once per deletion Region."""
    if lifecycle_id is not None:
        e.equals("ack.lifecycle", lifecycle_id, "lifecycle_id")
    e.equals("ack.deleted", DELETED, "desired_state")
    e.equals("ack.generation", generation, "deletion_generation")
    e.contains("ack.member", region, "deletion_regions")
    acked = e.path("region_status", region, "deletion_generation")
    e.require("ack.once", f"attribute_not_exists({acked}) OR {acked} <> {e.value(generation)}")


def purge(
    e: Expression,
    generation: str,
    deletion_regions: list[str],
    lifecycle_id: str | None,
    updated_at: str | None,
) -> None:
    """Removal of the record: deleted, that generation, every deletion Region acknowledged it."""
    e.equals("purge.deleted", DELETED, "desired_state")
    e.equals("purge.generation", generation, "deletion_generation")
    e.equals("purge.regions", deletion_regions, "deletion_regions")
    for region in deletion_regions:
        e.equals("purge.acknowledged", generation, "region_status", region, "deletion_generation")
    if lifecycle_id is not None:
        e.equals("purge.lifecycle", lifecycle_id, "lifecycle_id")
    if updated_at is not None:
        e.equals("purge.snapshot", updated_at, "updated_at")


def advancing(e: Expression, now: str) -> None:
    """updated_at only moves forward, whatever the writing host's clock says."""
    stamp = e.path("updated_at")
    e.require("clock.advances", f"attribute_not_exists({stamp}) OR {stamp} < {e.value(now)}")
