"""What `deploy --wait` and `delete --wait` report while they wait: Regions running, Regions silent,
Regions with no live reconciler (its heartbeat, `gco.reconcile.heartbeat`), Regions whose
acknowledgement is awaited (`gco.cli.wait.Progress`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import click

from gco import aws
from gco.cli.wait import Progress
from gco.endpoints import EndpointRecord, EndpointStore, observed_state, operations
from gco.endpoints.errors import EndpointNotFoundError
from gco.endpoints.tokens import parse_timestamp
from gco.inference.invoke import local_bases
from gco.inference.regional_outputs import invoke_urls
from gco.reconcile.errors import HeartbeatError
from gco.reconcile.heartbeat import (
    Heartbeat,
    Liveness,
    SsmParameters,
    liveness,
    observation_stale,
    read_heartbeat,
    utc_now,
)

# A Region's reconciler writes a first status within seconds of a new record (docs/reconciler.md);
# a wait that has heard nothing from a Region for this long says so.
SILENT_REGION_S = 60.0
# A Region with no heartbeat (or one that cannot be read) is asked again after this long; a
# Region's heartbeat is asked again after one of its own sweep intervals, and before any verdict
# that its reconciler is not live (`ReconcilerWatch.check`).
HEARTBEAT_REREAD_S = 15.0


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


class ReconcilerWatch:
    """Whether each Region's reconciler is live, from the heartbeat its sweep writes, judged at each
    call. A read heartbeat is reused for one of its own sweep intervals (`every_s`: no newer one
    can exist sooner), and a verdict "not live" is only ever given from a read made by that call:
    a cached heartbeat ages while the Region's reconciler writes newer ones, and judging its age
    against the `STALE_SWEEPS` x `every_s` bound would call a healthy reconciler dead (one setting,
    the sweep interval, decides both the reuse and the bound). A missing or unreadable heartbeat is
    asked again after `HEARTBEAT_REREAD_S`.

    Parameters:
        read: a Region's last heartbeat (None: never written); may raise `HeartbeatError`.
        clock: now, in UTC (injected for tests).
    """

    def __init__(
        self, read: Callable[[str], Heartbeat | None], clock: Callable[[], datetime] = utc_now
    ) -> None:
        self.read, self.clock = read, clock
        self._read_at: dict[str, tuple[datetime, Heartbeat | HeartbeatError | None]] = {}

    def check(self, region: str) -> Liveness | HeartbeatError:
        """The Region's reconciler liveness now, or why its heartbeat could not be read."""
        now = self.clock()
        cached = self._read_at.get(region)
        if cached is not None:
            read_at, found = cached
            held = (now - read_at).total_seconds()
            if isinstance(found, Heartbeat):
                verdict = liveness(found, now)
                if verdict.live and held < found.every_s:
                    return verdict
            elif held < HEARTBEAT_REREAD_S and found is not None:
                return found  # unreadable: asked again later
        try:
            fresh: Heartbeat | HeartbeatError | None = self.read(region)
        except HeartbeatError as error:
            fresh = error
        self._read_at[region] = (now, fresh)
        return fresh if isinstance(fresh, HeartbeatError) else liveness(fresh, now)

    def stale(self, record: EndpointRecord) -> dict[str, str]:
        """The target Regions whose observation of `record` is stale now, each with why
        (`gco.reconcile.heartbeat.observation_stale`); a Region whose heartbeat cannot be read or
        was never written is not judged."""
        now = self.clock()
        found: dict[str, str] = {}
        for region in record.target_regions:
            status = record.region_status.get(region)
            if status is None or status.lifecycle_id != record.lifecycle_id:
                continue
            check = self.check(region)
            if isinstance(check, HeartbeatError):
                continue
            seen = parse_timestamp(status.last_sync) if status.last_sync else None
            why = observation_stale(seen, check.heartbeat, now)
            if why is not None:
                found[region] = why
        return found


def reconciler_watch(table: str, endpoint_url: str | None) -> ReconcilerWatch:
    """A `ReconcilerWatch` over each Region's own Parameter Store (one client per Region)."""

    @functools.cache
    def parameters(region: str) -> SsmParameters:
        return SsmParameters(aws.client("ssm", region=region, endpoint_url=endpoint_url))

    return ReconcilerWatch(lambda region: read_heartbeat(parameters(region), table, region))


def ready_progress(
    store: EndpointStore,
    name: str,
    served: Callable[[str], bool] | None = None,
    reconcilers: ReconcilerWatch | None = None,
    lifecycle_id: str | None = None,
) -> Progress[EndpointRecord]:
    """Regions running the current lifecycle; a Region in error ends the wait; a pending Region
    whose reconciler is not live (`reconcilers`) is named at once; a Region silent for
    `SILENT_REGION_S` is named, with whether a stack serves it at all (`served`). A delete (or a
    new lifecycle, when `lifecycle_id` names the awaited one) ends the wait at once, naming it:
    what was awaited will never run.

    Raises:
        click.ClickException: a Region reports an error for the current lifecycle, or the
            endpoint was deleted, purged or redeployed while waiting.
    """
    try:
        record = operations.fresh(store, name)
    except EndpointNotFoundError:
        raise click.ClickException(f"{name} was deleted and purged while waiting: it will not run") from None
    if record.is_deleted:
        when = f" at {record.deleted_at}" if record.deleted_at else ""
        raise click.ClickException(f"{name} was deleted{when} while waiting: it will not run")
    if lifecycle_id is not None and record.lifecycle_id != lifecycle_id:
        raise click.ClickException(
            f"{name} was redeployed while waiting (lifecycle {record.lifecycle_id}, not {lifecycle_id})"
        )
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
            + (f" ({note})" if (note := observed_state.region_note(s)) else "")
            if s
            else f"{r} pending"
        )
        + _hint(name, r, r in silent, served, reconcilers)
        for r, s in states.items()
        if r not in done
    )
    return Progress(len(done), len(states), not pending, pending, record)


def _hint(
    name: str,
    region: str,
    silent: bool,
    served: Callable[[str], bool] | None,
    reconcilers: ReconcilerWatch | None,
) -> str:
    """What a pending Region's hint says: no stack at all there (once silent), no live reconciler
    (its heartbeat missing or old), or a live reconciler that has not written for this endpoint."""
    if silent and served is not None and not served(region):
        remove = f"gco inference regions {name} --remove {region}"
        return f" (no stack serves {region}, so no reconciler will: {remove})"
    check = reconcilers.check(region) if reconcilers is not None else None
    if isinstance(check, Liveness) and not check.live:
        return f" ({check.describe()})"
    if not silent:
        return ""
    if isinstance(check, Liveness):
        return f" ({check.describe()}, but it has written nothing for this endpoint in {SILENT_REGION_S:g} s)"
    unread = f"; its heartbeat cannot be read: {check}" if check is not None else ""
    unwritten = f"no reconciler has written for it in {SILENT_REGION_S:g} s"
    return f" ({unwritten}: is its Regional stack deployed?{unread})"


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


def purge_progress(
    store: EndpointStore, name: str, reconcilers: ReconcilerWatch | None = None
) -> Progress[None]:
    """Regions that acknowledged the delete. `forget-region` is suggested only for a pending Region
    whose reconciler is really not live (its heartbeat missing or past its bound, read afresh: a
    live reconciler acknowledges within seconds); a Region whose heartbeat cannot be read is named
    as such."""
    record = store.get(name)
    if record is None:
        return Progress(1, 1, True, "purged", None)
    pending = record.pending_deletion_regions()
    total = len(record.deletion_regions or [])
    notes = []
    for region in pending:
        check = reconcilers.check(region) if reconcilers is not None else None
        if isinstance(check, Liveness) and not check.live:
            forget = f"gco inference forget-region {name} --region {region} --yes"
            notes.append(f"{region} ({check.describe()}: if its stack is gone, {forget})")
        elif isinstance(check, HeartbeatError):
            notes.append(f"{region} (its heartbeat cannot be read: {check})")
        else:
            notes.append(region)
    detail = "awaiting the acknowledgement of " + ", ".join(notes)
    return Progress(total - len(pending), total, False, detail, None)
