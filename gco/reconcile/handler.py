"""The stream-triggered entry: a Lambda DynamoDB-stream event in, a partial batch response out.

Each stream record is only a trigger: its key names the endpoint, and the reconciler reads the
record afresh (strongly consistent) before acting, never trusting the image in the event. A
batch may carry several records of one endpoint; it is reconciled once (every record of the
batch was written before the batch was delivered, so one fresh read covers them all). A record
that fails (or carries no endpoint name: a poison record) is reported in `batchItemFailures`;
Lambda retries from it and, after the configured attempts, sends it to the dead-letter queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from gco.reconcile.errors import PoisonRecordError as PoisonRecordError  # noqa: PLC0414 (re-exported)
from gco.reconcile.failures import FailureKind, report_failure
from gco.reconcile.reconciler import Reconciler
from gco.reconcile.record_writes import Outcome
from gco.reconcile.stream_event import StreamRecord
from gco.reconcile.throughput import STREAM_SETTINGS

log = logging.getLogger(__name__)
KEY = "endpoint_name"
ENTRY = "stream"


def parse_stream_record(raw: Any) -> StreamRecord | None:
    """A raw stream record as a `StreamRecord`; None for one that does not have the record's shape."""
    try:
        return StreamRecord.model_validate(raw)
    except ValidationError:
        return None


def endpoint_name_of(record: StreamRecord | None) -> str:
    """The endpoint name in a stream record's keys.

    Raises:
        PoisonRecordError: the record has no string `endpoint_name` key (or is no stream record).
    """
    name = record.key(KEY) if record is not None else None
    if name is None:
        event_id = record.event_id if record is not None else None
        raise PoisonRecordError(f"stream record {event_id} has no {KEY} key")
    return name


SETTLED = frozenset({"running", "stopped", "deleted", "error"})


def _desired_view(image: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in image.items() if key not in ("updated_at", "region_status")}


def _own_state(image: dict[str, Any], region: str) -> Any:
    return ((image.get("region_status") or {}).get("M") or {}).get(region)


def is_status_echo(record: StreamRecord, region: str) -> bool:
    """True for a MODIFY that changed only Region status (and updated_at), not this Region's work.

    Such a change cannot alter what this Region must do: each Region acts on the record's
    desired fields and on its own status, and the last deletion acknowledgement purges by
    itself (the sweep retries a purge that failed). When this Region's own status moved to a
    progressing state (creating, updating, stopping, deleting) the record is reconciled anyway:
    that echo is what re-checks readiness. Skipping the rest avoids a read per status write.
    """
    change = record.dynamodb
    old, new = (change.old_image, change.new_image) if change is not None else (None, None)
    if record.event_name != "MODIFY" or not old or not new or _desired_view(old) != _desired_view(new):
        return False
    own = _own_state(new, region)
    if own == _own_state(old, region):
        return True
    state = ((own or {}).get("M") or {}).get("state", {}).get("S")
    return state in SETTLED


def _targets(records: list[StreamRecord | None], region: str) -> list[str]:
    """The distinct endpoints of a batch that need a reconcile, in first-seen order."""
    names: list[str] = []
    for record in records:
        try:
            name = endpoint_name_of(record)
        except PoisonRecordError:
            continue  # reported by the batch processor
        if name not in names and record is not None and not is_status_echo(record, region):
            names.append(name)
    return names


def handle_stream_event(
    event: dict[str, Any],
    reconciler: Reconciler,
    context: Any = None,
    *,
    concurrency: int = STREAM_SETTINGS.handler_concurrency,
    on_failure: Callable[[FailureKind], None] | None = None,
) -> dict[str, Any]:
    """Process one Lambda DynamoDB-stream event; returns `{"batchItemFailures": [...]}`.

    Each endpoint of the batch is reconciled once (every record of the batch was written
    before the batch was delivered, so one fresh read covers them all), up to `concurrency`
    endpoints at a time (`throughput.STREAM_SETTINGS`); a record whose endpoint failed is reported
    as a batch item failure. No reconcile waits for readiness inside the batch (a batch returns
    when its slowest endpoint does): a progressing endpoint is looked at again by its own status
    echo or by the sweep.

    Every failure is handled by one rule (`failures.py`), a bug as much as a gco error: each failed
    endpoint is logged once with its kind (and `on_failure` called with it, for the metrics), and
    only its records are reported. A failure of the batch's shared steps (the Region's system
    objects, the batch's one list) fails every endpoint of the batch, never the invocation.
    """
    records = [parse_stream_record(raw) for raw in event.get("Records") or []]
    results = _reconcile_batch(reconciler, _targets(records, reconciler.region), concurrency)
    failed: list[tuple[str, Exception]] = [
        (name, error) for name, error in results.items() if isinstance(error, Exception)
    ]
    failures: list[dict[str, Any]] = []
    for record in records:
        try:
            outcome = results.get(endpoint_name_of(record))
        except PoisonRecordError as poison:
            failed.append(("-", poison))
            outcome = poison
        if isinstance(outcome, Exception):
            failures.append({"itemIdentifier": record.item_identifier if record is not None else None})
    for name, raised in failed:
        kind = report_failure(ENTRY, name, reconciler.region, raised)
        if on_failure is not None:
            on_failure(kind)
    for name, result in results.items():
        if isinstance(result, Outcome):
            log.info("reconciled endpoint=%s region=%s outcome=%s", name, reconciler.region, result.kind)
    return {"batchItemFailures": failures}


def _reconcile_batch(
    reconciler: Reconciler, names: list[str], concurrency: int
) -> dict[str, Outcome | Exception]:
    """Each endpoint's outcome, or what it raised; a failure of the shared steps is every endpoint's."""
    if not names:
        return {}
    try:
        futures = reconciler.reconcile_many(names, wait=0.0, concurrency=concurrency)
    except Exception as shared:  # one rule for every failure: failures.py
        return dict.fromkeys(names, shared)
    results: dict[str, Outcome | Exception] = {}
    for name, future in futures.items():
        raised = future.exception()
        results[name] = raised if isinstance(raised, Exception) else future.result()
    return results
