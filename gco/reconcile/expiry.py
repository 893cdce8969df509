"""The scheduled cleanup: matrix endpoints whose run's deadline has passed are destroyed.

The live validation matrix (`gco.validation`) labels each of its records with its owner (the run
id, `OWNER_LABEL`) and its deadline (epoch seconds, `DEADLINE_LABEL`: the run's start plus
`job_timeout_seconds`); both labels are defined here, where the sweep reads them, and the matrix
imports them. A run whose machine is lost and never resumed would leave its GPU endpoints running;
each Region's scheduled sweep (the sweep Lambda, and the local stack's sweep thread) calls
`destroy_expired`, which deletes
every live record of that Region carrying both labels whose deadline has passed. The delete is
fenced by the owner label and the lifecycle id just read, so a record that changed meanwhile (a new
lifecycle of the same name, another owner) is not touched; the reconciler then removes the objects
and purges the record as for any delete. A resumed run keeps its deadline (it ends at it), so the
cleanup never takes endpoints from a run still inside its bounds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from gco.endpoints import operations
from gco.endpoints.errors import EndpointNotFoundError
from gco.endpoints.record import EndpointRecord
from gco.endpoints.store import EndpointStore
from gco.errors import GcoError

log = logging.getLogger(__name__)
OWNER_LABEL = "gco-managed-inference-validation-owner"
DEADLINE_LABEL = "gco-managed-inference-validation-deadline"


@dataclass
class ExpiryReport:
    """What one cleanup did: the endpoints it deleted, and those it could not (with why)."""

    destroyed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def deadline_of(record: EndpointRecord) -> int | None:
    """The run deadline a matrix record carries (None: not a matrix record, or no valid deadline)."""
    value = record.labels.get(DEADLINE_LABEL)
    if record.labels.get(OWNER_LABEL) is None or value is None or not value.isdigit():
        return None
    return int(value)


def expired(records: Iterable[EndpointRecord], now: float) -> list[EndpointRecord]:
    """The live matrix records whose run's deadline is at or before `now` (pure)."""
    found = []
    for record in records:
        deadline = deadline_of(record)
        if deadline is not None and deadline <= now and not record.is_deleted:
            found.append(record)
    return found


def destroy_expired(store: EndpointStore, *, region: str, now: float) -> ExpiryReport:
    """Delete every expired matrix record targeting `region`, fenced by owner label and lifecycle.

    Never raises for one record (its failure is in the report; the next sweep tries again).

    Raises:
        GcoError: the table could not be listed (nothing was deleted).
    """
    report = ExpiryReport()
    for record in expired(store.list(target_region=region, consistent_read=True), now):
        name, owner = record.endpoint_name, record.labels[OWNER_LABEL]
        try:
            operations.delete(
                store,
                name,
                expected_lifecycle_id=record.lifecycle_id,
                expected_owner_label=(OWNER_LABEL, owner),
            )
        except EndpointNotFoundError:
            continue  # purged meanwhile: nothing left to destroy
        except GcoError as error:
            report.failed[name] = f"{type(error).__name__}: {error}"
            continue
        log.info(
            "destroyed matrix endpoint %s of run %s: its deadline %s passed", name, owner, deadline_of(record)
        )
        report.destroyed.append(name)
    return report
