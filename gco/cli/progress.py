"""What `deploy --wait` and `delete --wait` report while they wait: Regions running, Regions silent,
Regions whose acknowledgement is awaited (`gco.cli.wait.Progress`)."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from gco.cli import views
from gco.cli.wait import Progress
from gco.endpoints import EndpointRecord, EndpointStore, operations
from gco.endpoints.tokens import parse_timestamp

# A Region's reconciler writes a first status within seconds of a new record (docs/reconciler.md);
# a wait that has heard nothing from a Region for this long says so.
SILENT_REGION_S = 60.0


def ready_progress(store: EndpointStore, name: str) -> Progress[EndpointRecord]:
    record = operations.fresh(store, name)
    states = {region: record.region_status.get(region) for region in record.target_regions}
    done = [
        r for r, s in states.items() if s and s.state == "running" and s.lifecycle_id == record.lifecycle_id
    ]
    failed = [f"{r}: {s.error or 'error'}" for r, s in states.items() if s and s.state == "error"]
    if failed:
        raise click.ClickException("; ".join(failed))
    silent = _silent_regions(record)
    hint = " (no reconciler has written for it: is its Regional stack deployed?)"
    pending = ", ".join(
        (
            f"{r} {s.state} {s.replicas_ready}/{s.replicas_desired} ready"
            + (f" ({note})" if (note := views.region_note(s)) else "")
            if s
            else f"{r} pending"
        )
        + (hint if r in silent else "")
        for r, s in states.items()
        if r not in done
    )
    return Progress(len(done), len(states), not pending, pending, record)


def _silent_regions(record: EndpointRecord) -> list[str]:
    """Target Regions whose reconciler has written nothing for this lifecycle though the record has
    existed for `SILENT_REGION_S`: no live reconciler serves them, or their stack is not deployed."""
    if record.created_at is None:
        return []
    age = (datetime.now(UTC) - parse_timestamp(record.created_at)).total_seconds()
    if age < SILENT_REGION_S:
        return []
    return [
        region
        for region in record.target_regions
        if (status := record.region_status.get(region)) is None or status.lifecycle_id != record.lifecycle_id
    ]


def purge_progress(store: EndpointStore, name: str) -> Progress[None]:
    record = store.get(name)
    if record is None:
        return Progress(1, 1, True, "purged", None)
    pending = record.pending_deletion_regions()
    total = len(record.deletion_regions or [])
    detail = "awaiting the acknowledgement of " + ", ".join(pending)
    if pending:
        detail += (
            f" (a Region no reconciler serves any more: gco inference forget-region {name} --region R --yes)"
        )
    return Progress(total - len(pending), total, False, detail, None)
