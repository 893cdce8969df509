"""The reconciler's reads and writes of an endpoint's record: a strongly consistent read, fenced Region
status writes, terminal errors, and the purge once every Region acknowledged a deletion.

Every write is conditional on what the reconciler read (lifecycle, Region generation, deletion
generation): a stale reconciler's write fails and it reads again (`gco.endpoints.store`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from gco.endpoints.record import EndpointRecord
from gco.endpoints.store import EndpointStore
from gco.reconcile.planner import StatusWrite
from gco.reconcile.proxy.route_changes import RouteChanges

log = logging.getLogger(__name__)
OutcomeKind = Literal["done", "requeue", "terminal"]


@dataclass(frozen=True)
class Outcome:
    """How one endpoint's reconcile ended (`reconciler.py` says what each kind means), with its counts."""

    kind: OutcomeKind
    after: float = 0.0
    detail: str = ""
    applied: int = 0
    deleted: int = 0
    status_writes: int = 0
    purged: bool = False


@dataclass
class Tally:
    """What one endpoint's reconcile did: counts for its outcome, and its route changes."""

    applied: int = 0
    deleted: int = 0
    writes: int = 0
    purged: bool = False
    routes: RouteChanges = field(default_factory=RouteChanges)  # what this reconcile did to routes

    def outcome(self, kind: OutcomeKind, detail: str, after: float = 0.0) -> Outcome:
        return Outcome(kind, after, detail, self.applied, self.deleted, self.writes, self.purged)


class RecordWriter:
    """One Region's reads and writes of endpoint records in the home table."""

    def __init__(self, store: EndpointStore, region: str) -> None:
        self.store = store
        self.region = region

    def read(self, name: str) -> EndpointRecord | None:
        record = self.store.get(name, consistent_read=True)
        for _ in range(3):
            if record is None or not record.is_legacy:
                return record
            record = self.store.ensure_lifecycle_metadata(record) or self.store.get(
                name, consistent_read=True
            )
        return record

    def read_many(self, names: Sequence[str]) -> dict[str, EndpointRecord | None]:
        """The records of `names` read at once (strongly consistent), for a batch's first passes; a
        name is left out when it must be read alone (`read`): the batch read could not answer for
        it, or its record predates the lifecycle metadata."""
        found = self.store.get_many(names, consistent_read=True)
        return {name: record for name, record in found.items() if record is None or not record.is_legacy}

    def record_error(self, name: str, record: EndpointRecord | None, message: str, tally: Tally) -> None:
        """A terminal `error` status for a live record, written only when it differs."""
        if record is None or record.is_deleted:
            return
        failed = StatusWrite(
            state="error",
            lifecycle_id=record.lifecycle_id,
            region_generation=record.region_generations.get(self.region),
            error=message[:500],
        )
        current = record.region_status.get(self.region)
        if current is None or current.state != "error" or current.error != failed.error:
            self.write_status(name, record, failed, tally)

    def write_status(
        self, name: str, record: EndpointRecord | None, status: StatusWrite, tally: Tally
    ) -> EndpointRecord | None:
        written = self.store.region_writes.update_region_status(
            name,
            self.region,
            status.state,
            replicas_ready=status.replicas_ready,
            replicas_desired=status.replicas_desired,
            error=status.error,
            details=status.details(),
            expected_lifecycle_id=status.lifecycle_id,
            expected_region_generation=status.region_generation,
            expected_deletion_generation=status.deletion_generation,
        )
        if written is None:
            return None
        tally.writes += 1
        log.info("status: endpoint=%s region=%s state=%s", name, self.region, status.state)
        if status.deletion_generation is not None and not written.pending_deletion_regions():
            self.purge(name, written, tally)  # the last acknowledgement purges
        return written

    def purge(self, name: str, record: EndpointRecord | None, tally: Tally) -> None:
        if record is None or record.deletion_generation is None or tally.purged:
            return
        tally.purged = self.store.region_writes.purge(
            name,
            expected_lifecycle_id=record.lifecycle_id,
            expected_deletion_generation=record.deletion_generation,
        )
        if tally.purged:
            log.info("purged: endpoint=%s (every Region acknowledged)", name)
