"""A DynamoDB-stream poller for the local stack: what Lambda's event source mapping does in AWS.

It reads the table's stream (`dynamodbstreams` on the moto server), hands the handler the very
event shape Lambda would (`{"Records": [...]}` with `eventSourceARN`, `awsRegion`, low-level
attribute values, epoch `ApproximateCreationDateTime`), and honours the partial batch response:
the checkpoint advances past every record before the first reported failure; a record that
fails `max_retries` times (or a batch whose handler raised that often) goes to the dead letters
and the checkpoint moves past it. As the mapping does with a parallelization factor, the records
of one GetRecords call are split by partition key (the endpoint) into concurrent batches, so one
endpoint's records stay in order. One poller per Region stands in for that Region's replica
stream and its event source mapping.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

log = logging.getLogger(__name__)
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
MAX_SHARDS = 100
MAX_PARALLELIZATION = 10  # Lambda's ParallelizationFactor is 1 to 10
MAX_GET_RECORDS = 1000  # GetRecords returns at most 1,000 records


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


def partition(records: list[dict[str, Any]], batches: int, batch_size: int) -> list[list[dict[str, Any]]]:
    """Split a shard's records into at most `batches` batches by partition key, order kept per key.

    As Lambda does with a parallelization factor: every record of one key (one endpoint) lands in
    the same batch, in stream order, so two batches never race on one endpoint. A batch holds at
    most `batch_size` records; records past that wait for the next poll (the caller's checkpoint
    then stops before the first record left out).
    """
    groups: list[list[dict[str, Any]]] = [[] for _ in range(max(1, batches))]
    for record in records:
        key = json.dumps((record.get("dynamodb") or {}).get("Keys") or {}, sort_keys=True)
        groups[zlib.crc32(key.encode()) % len(groups)].append(record)
    return [group[:batch_size] for group in groups if group]


class StreamPoller:
    """Polls every shard of one stream and invokes `handler` per batch.

    Parameters:
        client: a `dynamodbstreams` boto3 client.
        stream_arn: the table's LatestStreamArn.
        handler: called as `handler(event, context)`, returns `{"batchItemFailures": [...]}`.
        batch_size: records per invocation (Lambda's BatchSize).
        parallelization: batches of one shard in flight at once (Lambda's ParallelizationFactor):
            the records of one GetRecords call are split by partition key into up to this many
            batches, invoked concurrently, so the records of one endpoint stay in order.
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
        parallelization: int = 1,
        max_retries: int = 3,
    ) -> None:
        self.client = client
        self.stream_arn = stream_arn
        self.handler = handler
        self.region = region
        self.batch_size = batch_size
        self.parallelization = max(1, min(MAX_PARALLELIZATION, parallelization))
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
        limit = min(MAX_GET_RECORDS, self.batch_size * self.parallelization)
        records = self.client.get_records(ShardIterator=iterator, Limit=limit)["Records"]
        if not records:
            return 0
        event = lambda_event(records, self.stream_arn, self.region)
        sequences = [record["dynamodb"]["SequenceNumber"] for record in records]
        batches = partition(event["Records"], self.parallelization, self.batch_size)
        if len(batches) == 1:
            failed = self._invoke(batches[0])
        else:
            with ThreadPoolExecutor(max_workers=len(batches)) as pool:
                failed = [seq for found in pool.map(self._invoke, batches) for seq in found]
        delivered = {record["dynamodb"]["SequenceNumber"] for batch in batches for record in batch}
        held = next((i for i, seq in enumerate(sequences) if seq not in delivered), len(sequences))
        # The checkpoint stops before the earliest failure of any batch (or the first record held
        # for the next poll): records after it are delivered again (at least once; reconciling is
        # idempotent).
        first = min((sequences.index(seq) for seq in failed if seq in sequences), default=None)
        if failed and first is None:
            first = 0
        if first is None or held < first:
            if held > 0:
                self.checkpoints[shard_id] = sequences[held - 1]
            return len(delivered)
        seq = sequences[first]
        self._failures[seq] = self._failures.get(seq, 0) + 1
        if self._failures[seq] >= self.max_retries:
            log.warning("stream record %s failed %d times: dead-lettered", seq, self._failures[seq])
            self.dead_letters.append(event["Records"][first])
            first += 1
        if first > 0:
            self.checkpoints[shard_id] = sequences[first - 1]
        return len(delivered)

    def _invoke(self, batch: list[dict[str, Any]]) -> list[str]:
        """One invocation; returns the sequence numbers of the records it reports as failed."""
        try:
            response = self.handler({"Records": batch}, None)
            return [item["itemIdentifier"] for item in response.get("batchItemFailures") or []]
        except Exception:  # the invocation died: Lambda retries the whole batch
            log.exception("stream handler failed; the batch will be retried")
            return [batch[0]["dynamodb"]["SequenceNumber"]]
