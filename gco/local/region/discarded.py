"""What Lambda sends an event source mapping's on-failure destination for a discarded stream record.

When a record's retries are spent (`MaximumRetryAttempts`) or it is older than the mapping's
`MaximumRecordAgeInSeconds`, Lambda discards it and, with a destination configured
(`DestinationConfig.OnFailure`: an SQS queue or an SNS topic), sends a JSON document describing the
failed invocation, not the record itself: `requestContext` (the function's ARN, the `condition` that
discarded it, the invoke count), `responseContext`, `version`,
`timestamp` and `DDBStreamBatchInfo` (the shard, the first and last sequence numbers, their
approximate arrival, the batch size, the stream's ARN) (Lambda Developer Guide, "Retaining discarded
records for a DynamoDB event source in Lambda", services-dynamodb-errors.html). The consumer reads the
records again from the stream with those sequence numbers.

The conditions: `RetryAttemptsExhausted` is the one the guide's examples show; for a record past its
maximum age the guide names none, and `RecordAgeExceeded` is the one LocalStack's stream poller sends
(localstack-core/localstack/services/lambda_/event_source_mapping/pollers/stream_poller.py).

`sqs_destination` sends it to the mapping's queue on the moto server; `failure_record` builds it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

RETRIES_EXHAUSTED = "RetryAttemptsExhausted"
RECORD_AGE_EXCEEDED = "RecordAgeExceeded"


def _arrival(record: dict[str, Any]) -> str:
    created = record.get("dynamodb", {}).get("ApproximateCreationDateTime")
    moment = datetime.fromtimestamp(float(created), UTC) if created is not None else datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def failure_record(
    records: Sequence[dict[str, Any]],
    *,
    shard_id: str,
    stream_arn: str,
    function_arn: str,
    attempts: int,
    now: datetime | None = None,
    condition: str = RETRIES_EXHAUSTED,
) -> dict[str, Any]:
    """The document Lambda sends the on-failure destination for `records` (the discarded batch),
    discarded for `condition` (`RETRIES_EXHAUSTED` or `RECORD_AGE_EXCEEDED`)."""
    sequences = [record["dynamodb"]["SequenceNumber"] for record in records]
    return {
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "functionArn": function_arn,
            "condition": condition,
            "approximateInvokeCount": attempts,
        },
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "version": "1.0",
        "timestamp": (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": sequences[0],
            "endSequenceNumber": sequences[-1],
            "approximateArrivalOfFirstRecord": _arrival(records[0]),
            "approximateArrivalOfLastRecord": _arrival(records[-1]),
            "batchSize": len(records),
            "streamArn": stream_arn,
        },
    }


def sqs_destination(client: Any, queue_url: str) -> Callable[[dict[str, Any]], None]:
    """Send each failure record to the SQS queue at `queue_url` (the mapping's on-failure queue)."""

    def send(document: dict[str, Any]) -> None:
        client.send_message(QueueUrl=queue_url, MessageBody=json.dumps(document))

    return send
