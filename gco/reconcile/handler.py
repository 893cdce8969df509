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

from gco.reconcile.errors import ReconcileError
from gco.reconcile.reconciler import Outcome, Reconciler

log = logging.getLogger(__name__)
KEY = "endpoint_name"


class PoisonRecordError(ReconcileError):
    """A stream record that names no endpoint; it can never succeed."""


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


def _own_view(image: dict[str, Any], region: str) -> dict[str, Any]:
    """A stored image without updated_at and without the status of Regions other than `region`."""
    view = {key: value for key, value in image.items() if key not in ("updated_at", "region_status")}
    view["region_status"] = ((image.get("region_status") or {}).get("M") or {}).get(region)
    return view


def only_other_regions_changed(record: DynamoDBRecord, region: str) -> bool:
    """True for a MODIFY whose only change is another Region's status (and updated_at).

    Such a change cannot alter what this Region must do: each Region acts on the record's
    desired fields and on its own status, and the last deletion acknowledgement purges by
    itself (the sweep retries a purge that failed). Skipping it halves the stream's work.
    """
    raw = record.raw_event
    images = raw.get("dynamodb") or {}
    old, new = images.get("OldImage"), images.get("NewImage")
    if raw.get("eventName") != "MODIFY" or not old or not new:
        return False
    return _own_view(old, region) == _own_view(new, region)


def stream_record_handler(reconciler: Reconciler) -> Callable[[DynamoDBRecord], Outcome | None]:
    """A per-batch record handler that reconciles each endpoint once per batch."""
    seen: set[str] = set()

    def handle(record: DynamoDBRecord) -> Outcome | None:
        name = endpoint_name_of(record)
        if name in seen or only_other_regions_changed(record, reconciler.region):
            return None
        outcome = reconciler.reconcile(name)
        seen.add(name)
        log.info("reconciled endpoint=%s region=%s outcome=%s", name, reconciler.region, outcome.kind)
        return outcome

    return handle


def handle_stream_event(event: dict[str, Any], reconciler: Reconciler, context: Any = None) -> dict[str, Any]:
    """Process one Lambda DynamoDB-stream event; returns `{"batchItemFailures": [...]}`."""
    processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)
    response = process_partial_response(
        event=event,
        record_handler=stream_record_handler(reconciler),
        processor=processor,
        context=context,
    )
    return dict(response)
