"""Destroying one matrix endpoint: a fenced delete, the wait for its purge, bounded retries.

The delete is `gco.endpoints.operations.delete` pinned to the run's owner label and, once known,
the endpoint's lifecycle id: a record of the same name that is not this run's (another label, or
none) refuses the write, and is reported as left untouched. The purge is the reconciler's: the
record disappears once every Region acknowledged the deletion. A failed try (the store
unavailable, the purge not seen within `deletion_timeout_seconds`) is retried after
`destroy_retry_delay_seconds`, up to `destroy_attempts` tries in all.
"""

from __future__ import annotations

from collections.abc import Callable

from gco.endpoints import operations
from gco.endpoints.errors import EndpointNotFoundError, LostRaceError
from gco.endpoints.record import EndpointRecord
from gco.endpoints.store import EndpointStore
from gco.errors import GcoError
from gco.reconcile.expiry import OWNER_LABEL
from gco.validation.checkpoint import EndpointEntry
from gco.validation.checks import Outcome
from gco.validation.settings import MatrixSettings
from gco.waiting import Progress, Report, WaitTimeoutError, silent, wait_for


def records_of_run(store: EndpointStore, run_id: str) -> list[EndpointRecord]:
    """Every record carrying the run's owner label (strongly consistent: the inventory decides on it)."""
    return [r for r in store.list(consistent_read=True) if r.labels.get(OWNER_LABEL) == run_id]


def destroy_endpoint(
    store: EndpointStore,
    entry: EndpointEntry,
    *,
    run_id: str,
    settings: MatrixSettings,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    report: Report = silent,
) -> Outcome:
    """Delete and wait for the purge, retrying; an absent record is already destroyed.

    Parameters:
        report: shown the purge wait's progress lines (`gco.waiting.Report`).
    """
    problems: list[str] = []
    for attempt in range(1, settings.destroy_attempts + 1):
        try:
            operations.delete(
                store,
                entry.name,
                expected_lifecycle_id=entry.lifecycle_id,
                expected_owner_label=(OWNER_LABEL, run_id),
            )
        except EndpointNotFoundError:
            return Outcome(True, "no record: nothing to destroy", {"attempts": attempt, "problems": problems})
        except LostRaceError as error:
            current = store.get(entry.name, consistent_read=True)
            if current is not None and current.labels.get(OWNER_LABEL) != run_id:
                detail = f"not this run's record ({error}): left untouched"
                return Outcome(True, detail, {"attempts": attempt, "skipped": True, "problems": problems})
            problems.append(str(error))
        except GcoError as error:
            problems.append(f"{type(error).__name__}: {error}")
        else:
            try:
                _wait_purged(store, entry.name, settings, clock, sleep, report)
                return Outcome(True, f"purged (try {attempt})", {"attempts": attempt, "problems": problems})
            except (WaitTimeoutError, GcoError) as error:
                problems.append(f"{type(error).__name__}: {error}")
        if attempt < settings.destroy_attempts:
            sleep(settings.destroy_retry_delay_seconds)
    detail = f"not destroyed after {settings.destroy_attempts} tries: {problems[-1] if problems else ''}"
    return Outcome(False, detail, {"attempts": settings.destroy_attempts, "problems": problems})


def _wait_purged(
    store: EndpointStore,
    name: str,
    settings: MatrixSettings,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    report: Report,
) -> None:
    def poll() -> Progress[None]:
        record = store.get(name, consistent_read=True)
        if record is None:
            return Progress(1, 1, True, "", None)
        pending = record.pending_deletion_regions()
        return Progress(0, 1, False, f"awaiting {', '.join(pending) or 'the purge'}", None)

    wait_for(
        poll,
        what=f"purge of {name}",
        timeout=settings.deletion_timeout_seconds,
        interval=settings.poll_interval_seconds,
        sleep=sleep,
        clock=clock,
        report=report,
    )
