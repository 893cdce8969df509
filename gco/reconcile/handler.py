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

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from gco.reconcile.errors import PoisonRecordError as PoisonRecordError  # noqa: PLC0414 (re-exported)
from gco.reconcile.failures import FailureKind, report_failure
from gco.reconcile.reconciler import Outcome, Reconciler
from gco.reconcile.throughput import STREAM_SETTINGS

log = logging.getLogger(__name__)
KEY = "endpoint_name"
ENTRY = "stream"


def endpoint_name_of(record: DynamoDBRecord) -> str:
    """The endpoint name in a stream record's keys.

    Raises:
        PoisonRecordError: the record has no string `endpoint_name` key.
    """
    try:
        keys = record.dynamodb.keys if record.dynamodb is not None else None
    except (TypeError, ValueError, KeyError, AttributeError):
        keys = None
    name = (keys or {}).get(KEY)
    if not isinstance(name, str) or not name:
        raise PoisonRecordError(f"stream record {record.event_id} has no {KEY} key")
    return name


SETTLED = frozenset({"running", "stopped", "deleted", "error"})


def _desired_view(image: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in image.items() if key not in ("updated_at", "region_status")}


def _own_state(image: dict[str, Any], region: str) -> Any:
    return ((image.get("region_status") or {}).get("M") or {}).get(region)


def is_status_echo(record: DynamoDBRecord, region: str) -> bool:
    """True for a MODIFY that changed only Region status (and updated_at), not this Region's work.

    Such a change cannot alter what this Region must do: each Region acts on the record's
    desired fields and on its own status, and the last deletion acknowledgement purges by
    itself (the sweep retries a purge that failed). When this Region's own status moved to a
    progressing state (creating, updating, stopping, deleting) the record is reconciled anyway:
    that echo is what re-checks readiness. Skipping the rest avoids a read per status write.
    """
    raw = record.raw_event
    images = raw.get("dynamodb") or {}
    old, new = images.get("OldImage"), images.get("NewImage")
    if raw.get("eventName") != "MODIFY" or not old or not new or _desired_view(old) != _desired_view(new):
        return False
    own = _own_state(new, region)
    if own == _own_state(old, region):
        return True
    state = ((own or {}).get("M") or {}).get("state", {}).get("S")
    return state in SETTLED


def _targets(records: list[DynamoDBRecord], region: str) -> list[str]:
    """The distinct endpoints of a batch that need a reconcile, in first-seen order."""
    names: list[str] = []
    for record in records:
        try:
            name = endpoint_name_of(record)
        except PoisonRecordError:
            continue  # reported by the batch processor
        if name not in names and not is_status_echo(record, region):
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
    records = [DynamoDBRecord(raw) for raw in event.get("Records") or []]
    names = _targets(records, reconciler.region)
    results: dict[str, Outcome | Exception] = {}
    if names:
        try:
            futures = reconciler.reconcile_many(names, wait=0.0, concurrency=concurrency)
        except Exception as shared:  # one rule for every failure: failures.py
            results = dict.fromkeys(names, shared)
        else:
            for name, future in futures.items():
                raised = future.exception()
                results[name] = raised if isinstance(raised, Exception) else future.result()
    for name, result in results.items():
        if isinstance(result, Exception):
            kind = report_failure(ENTRY, name, reconciler.region, result)
            if on_failure is not None:
                on_failure(kind)

    def record_handler(record: DynamoDBRecord) -> Outcome | None:
        try:
            name = endpoint_name_of(record)
        except PoisonRecordError as error:
            kind = report_failure(ENTRY, "-", reconciler.region, error)
            if on_failure is not None:
                on_failure(kind)
            raise
        result = results.get(name)
        if isinstance(result, Exception):
            raise result
        if result is not None:
            log.info("reconciled endpoint=%s region=%s outcome=%s", name, reconciler.region, result.kind)
        return result

    processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)
    response = process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
    return dict(response)
