"""A DynamoDB-stream poller for the local stack: what Lambda's event source mapping does in AWS.

It reads the table's stream (`dynamodbstreams` on the moto server), hands the handler the very
event shape Lambda would (`{"Records": [...]}` with `eventSourceARN`, `awsRegion`, low-level
attribute values, epoch `ApproximateCreationDateTime`), and honours the partial batch response:
the checkpoint advances past every record before the first reported failure; a record that
fails `max_retries` times (or a batch whose handler raised that often) goes to the dead letters
and the checkpoint moves past it. One poller per Region stands in for that Region's replica
stream and its event source mapping.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

log = logging.getLogger(__name__)
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
MAX_SHARDS = 100


def _lambda_value(value: Any) -> Any:
    """boto3's decoded stream values back into Lambda's JSON (bytes as base64, times as epoch)."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime):
        return int(value.timestamp())
    if isinstance(value, dict):
        return {key: _lambda_value(item) for key, item in value.items()}
    if isinstance(value, list | set | tuple):
        return [_lambda_value(item) for item in value]
    return value


def lambda_event(records: list[dict[str, Any]], stream_arn: str, region: str) -> dict[str, Any]:
    """The Lambda DynamoDB-stream event for `records` as returned by GetRecords."""
    shaped = []
    for record in records:
        item = _lambda_value(record)
        item.setdefault("eventSource", "aws:dynamodb")
        item["awsRegion"] = region
        item["eventSourceARN"] = stream_arn
        shaped.append(item)
    return {"Records": shaped}


class StreamPoller:
    """Polls every shard of one stream and invokes `handler` per batch.

    Parameters:
        client: a `dynamodbstreams` boto3 client.
        stream_arn: the table's LatestStreamArn.
        handler: called as `handler(event, context)`, returns `{"batchItemFailures": [...]}`.
        batch_size: records per invocation (Lambda's BatchSize).
        max_retries: attempts of a failing record or batch before it is dead-lettered.
    """

    def __init__(
        self,
        client: Any,
        stream_arn: str,
        handler: Handler,
        *,
        region: str,
        batch_size: int = 100,
        max_retries: int = 3,
    ) -> None:
        self.client = client
        self.stream_arn = stream_arn
        self.handler = handler
        self.region = region
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.checkpoints: dict[str, str | None] = {}
        self.dead_letters: list[dict[str, Any]] = []
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()

    def poll_once(self) -> int:
        """One GetRecords per shard and one invocation per non-empty batch; returns records delivered."""
        with self._lock:
            shards = self.client.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]["Shards"]
            return sum(self._poll_shard(shard["ShardId"]) for shard in shards[:MAX_SHARDS])

    def drain(self, max_rounds: int = 50) -> int:
        """Poll until a round delivers nothing (bounded); returns records delivered."""
        total = 0
        for _ in range(max_rounds):
            handled = self.poll_once()
            total += handled
            if handled == 0:
                break
        return total

    def _poll_shard(self, shard_id: str) -> int:
        checkpoint = self.checkpoints.get(shard_id)
        arguments: dict[str, Any] = {"StreamArn": self.stream_arn, "ShardId": shard_id}
        if checkpoint is None:
            arguments["ShardIteratorType"] = "TRIM_HORIZON"
        else:
            arguments.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=checkpoint)
        iterator = self.client.get_shard_iterator(**arguments)["ShardIterator"]
        records = self.client.get_records(ShardIterator=iterator, Limit=self.batch_size)["Records"]
        if not records:
            return 0
        event = lambda_event(records, self.stream_arn, self.region)
        try:
            response = self.handler(event, None)
            failed = [item["itemIdentifier"] for item in response.get("batchItemFailures") or []]
        except Exception:  # the invocation died: Lambda retries the whole batch
            log.exception("stream handler failed; the batch will be retried")
            failed = [records[0]["dynamodb"]["SequenceNumber"]]
        sequences = [record["dynamodb"]["SequenceNumber"] for record in records]
        if not failed:
            self.checkpoints[shard_id] = sequences[-1]
            return len(records)
        first = min((sequences.index(seq) for seq in failed if seq in sequences), default=0)
        seq = sequences[first]
        self._failures[seq] = self._failures.get(seq, 0) + 1
        if self._failures[seq] >= self.max_retries:
            log.warning("stream record %s failed %d times: dead-lettered", seq, self._failures[seq])
            self.dead_letters.append(event["Records"][first])
            first += 1
        if first > 0:
            self.checkpoints[shard_id] = sequences[first - 1]
        return len(records)
