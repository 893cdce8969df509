"""What `deploy --wait` and `delete --wait` report while they wait: Regions running, Regions silent,
Regions whose acknowledgement is awaited (`gco.cli.wait.Progress`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import click

from gco import aws
from gco.cli import views
from gco.cli.wait import Progress
from gco.endpoints import EndpointRecord, EndpointStore, operations
from gco.endpoints.tokens import parse_timestamp
from gco.front_door import invoke_urls
from gco.invoke import local_bases

# A Region's reconciler writes a first status within seconds of a new record (docs/reconciler.md);
# a wait that has heard nothing from a Region for this long says so.
SILENT_REGION_S = 60.0


def region_served(name: str, endpoint_url: str | None) -> Callable[[str], bool]:
    """Whether a Region has a stack that runs a reconciler: on the local stack, a Region process
    (`GCO_INVOKE_URLS` names each); in AWS, its Regional stack (the stack's `InvokeUrl` output).
    Each Region is looked up once per command."""
    local = local_bases()
    if local:
        return lambda region: region in local

    @functools.cache
    def deployed(region: str) -> bool:
        def cloudformation(r: str) -> Any:
            return aws.client("cloudformation", region=r, endpoint_url=endpoint_url)

        return invoke_urls(name, [region], cloudformation).get(region) is not None

    return deployed


def ready_progress(
    store: EndpointStore, name: str, served: Callable[[str], bool] | None = None
) -> Progress[EndpointRecord]:
    """Regions running the current lifecycle; a Region in error ends the wait; a Region silent for
    `SILENT_REGION_S` is named, with whether a stack serves it at all (`served`)."""
    record = operations.fresh(store, name)
    states = {region: record.region_status.get(region) for region in record.target_regions}
    done = [
        r for r, s in states.items() if s and s.state == "running" and s.lifecycle_id == record.lifecycle_id
    ]
    failed = [f"{r}: {s.error or 'error'}" for r, s in states.items() if s and s.state == "error"]
    if failed:
        raise click.ClickException("; ".join(failed))
    silent = _silent_regions(record)
    pending = ", ".join(
        (
            f"{r} {s.state} {s.replicas_ready}/{s.replicas_desired} ready"
            + (f" ({note})" if (note := views.region_note(s)) else "")
            if s
            else f"{r} pending"
        )
        + (_silence(name, r, served) if r in silent else "")
        for r, s in states.items()
        if r not in done
    )
    return Progress(len(done), len(states), not pending, pending, record)


def _silence(name: str, region: str, served: Callable[[str], bool] | None) -> str:
    """What a silent Region's hint says: no stack at all there, or a reconciler not writing."""
    if served is not None and not served(region):
        remove = f"gco inference regions {name} --remove {region}"
        return f" (no stack serves {region}, so no reconciler will: {remove})"
    return f" (no reconciler has written for it in {SILENT_REGION_S:g} s: is its Regional stack deployed?)"


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
