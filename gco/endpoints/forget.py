"""Finishing a deleted record whose Region no reconciler serves any more: a fenced, explicit step.

A deleted record is purged only once every deletion Region acknowledged its deletion generation
(docs/fencing.md). A Region whose reconciler is gone (its Regional stack destroyed, or a Region
accepted with `--allow-new-regions` that no stack serves) never acknowledges, so the record would
stay `deleted` for good. `forget_region` lets an operator acknowledge for that one Region, and only:

- for a deleted record, a Region among its deletion Regions that has not acknowledged;
- when that Region's reconciler has written nothing for `silence` seconds: counted from its last
  status write for the record, or from the delete when it wrote none since (a live reconciler
  acknowledges a delete within seconds of it: docs/reconciler.md);
- conditioned as the Region's own acknowledgement (the same deletion generation, not yet
  acknowledged: a reconciler that acknowledges meanwhile wins), and recorded in the Region's
  status (`forgotten_by`, `forgotten_at`, `forgotten_after_s`).

What the Region's cluster still runs is not touched (nothing can reach it from here): the command
says so. The last acknowledgement purges the record, as a reconciler's would.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from gco.endpoints import names
from gco.endpoints.errors import InvalidSpecError, InvalidTransitionError, LostRaceError
from gco.endpoints.operations import fresh
from gco.endpoints.record import EndpointRecord
from gco.endpoints.store import EndpointStore
from gco.endpoints.tokens import format_timestamp, parse_timestamp

MIN_SILENCE_S = 300.0  # a reconciler's sweep runs every few minutes: less than this is no evidence
DEFAULT_SILENCE_S = 900.0


@dataclass(frozen=True)
class Forgotten:
    """What `forget_region` did: the record after the acknowledgement (None once purged)."""

    record: EndpointRecord | None
    purged: bool
    silent_for_s: float


def silence(record: EndpointRecord, region: str, now: datetime) -> tuple[float, str | None]:
    """(seconds since the Region's reconciler last wrote for the record or since the delete, its
    last write time or None)."""
    status = record.region_status.get(region)
    last = status.last_sync if status is not None else None
    since = [parse_timestamp(value) for value in (last, record.deleted_at) if value]
    if not since:
        return 0.0, last
    return (now - max(since)).total_seconds(), last


def _what_was_seen(record: EndpointRecord, region: str, last: str | None, quiet: float) -> str:
    """What the silence was counted from, as it is: the Region's last write for the record when it
    came after the delete, else the delete (saying whether the Region ever wrote for the record)."""
    deleted = record.deleted_at
    if last is not None and (deleted is None or parse_timestamp(last) >= parse_timestamp(deleted)):
        return f"{region}'s reconciler wrote for it {quiet:.0f} s ago (at {last})"
    before = (
        f"its reconciler last wrote for it at {last}, before the delete"
        if last is not None
        else "its reconciler never wrote for it"
    )
    return f"it was deleted {quiet:.0f} s ago (at {deleted}) and {region} has not acknowledged; {before}"


def forget_region(
    store: EndpointStore,
    name: str,
    region: str,
    *,
    silent_for: float = DEFAULT_SILENCE_S,
    by: str,
    now: datetime | None = None,
) -> Forgotten:
    """Acknowledge a silent Region's deletion of `name` on its behalf; purge if it was the last.

    Raises:
        InvalidSpecError: a bad name or Region, `silent_for` below `MIN_SILENCE_S`, or a Region
            that is not one of the record's deletion Regions.
        InvalidTransitionError: the record is not deleted, or the Region wrote too recently.
        LostRaceError: the Region's reconciler (or another operator) wrote meanwhile.
    """
    names.region(region, "--region", allow_new=True)
    if not MIN_SILENCE_S <= silent_for <= 365 * 86400:
        raise InvalidSpecError("--silent-for", f"must be from {MIN_SILENCE_S:g} s to a year")
    record = fresh(store, name)
    if not record.is_deleted or record.deletion_generation is None:
        raise InvalidTransitionError(
            name, "forget a Region of", record.desired_state, "delete it first (its reconcilers clean up)"
        )
    if region not in (record.deletion_regions or []):
        deletion_regions = ", ".join(record.deletion_regions or []) or "none"
        raise InvalidSpecError(
            "--region", f"{region} is not a deletion Region of {name} ({deletion_regions})"
        )
    if region not in record.pending_deletion_regions():
        return Forgotten(record, False, 0.0)  # acknowledged already: nothing to do
    moment = now or datetime.now(UTC)
    quiet, last = silence(record, region, moment)
    if quiet < silent_for:
        raise InvalidTransitionError(
            name,
            f"forget {region} of",
            "deleted",
            f"{_what_was_seen(record, region, last, quiet)}; it may still acknowledge: wait, or retry "
            f"after {silent_for:.0f} s of silence",
        )
    details = {
        "forgotten_by": by[:128],
        "forgotten_at": format_timestamp(moment),
        "forgotten_after_s": int(quiet),
    }
    written = store.region_writes.forget_region(
        name,
        region,
        expected_deletion_generation=record.deletion_generation,
        expected_last_sync=last,
        details=details,
    )
    if written is None:
        raise LostRaceError(
            name, f"forgetting {region}", "its reconciler or another operator wrote meanwhile"
        )
    if written.pending_deletion_regions():
        return Forgotten(written, False, quiet)
    purged = store.region_writes.purge(
        name,
        expected_lifecycle_id=written.lifecycle_id,
        expected_deletion_generation=record.deletion_generation,
    )
    return Forgotten(None if purged else written, purged, quiet)
