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

What is Lambda's cost and not the function's is kept cheap here, as the managed pollers are to the
function: GetRecords' records are handed on as the JSON protocol wrote them (a `before-parse`
hook keeps botocore's parser, which walks every attribute value of both images of every record,
off them: the wire form is already the event's), the next poll continues from GetRecords'
`NextShardIterator` when the whole answer was delivered (records a full batch held back are kept
for the next poll, not read again), and the shard list is described again only every
`SHARD_REFRESH_S`.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
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
SHARD_REFRESH_S = 10.0  # how often the shard list is described again (shards split, or close)
WIRE_RECORDS = "GcoWireRecords"  # where the before-parse hook leaves GetRecords' unparsed records
_GET_RECORDS_PARSE = "before-parse.dynamodb-streams.GetRecords"


def _keep_wire_records(
    response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any
) -> None:
    """botocore's `before-parse` hook for GetRecords: take the records out of the body unparsed.

    The JSON protocol's records are already the Lambda event's record shape (low-level attribute
    values, base64 binaries, epoch times); what is left of the body (NextShardIterator) and any
    error body are parsed as usual.
    """
    if response_dict.get("status_code", 500) >= 300:
        return
    body = json.loads(response_dict["body"] or b"{}")
    customized_response_dict[WIRE_RECORDS] = body.pop("Records", [])
    response_dict["body"] = json.dumps(body).encode()


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


def _wire_event(records: list[dict[str, Any]], stream_arn: str, region: str) -> dict[str, Any]:
    """`lambda_event` for records still in the protocol's JSON (nothing to convert)."""
    for record in records:
        record.setdefault("eventSource", "aws:dynamodb")
        record["awsRegion"] = region
        record["eventSourceARN"] = stream_arn
    return {"Records": records}


def partition(records: list[dict[str, Any]], batches: int, batch_size: int) -> list[list[dict[str, Any]]]:
    """Split a shard's records into at most `batches` batches by partition key, order kept per key.

    As Lambda does with a parallelization factor: every record of one key (one endpoint) lands in
    the same batch, in stream order, so two batches never race on one endpoint. A batch holds at
    most `batch_size` records: once a batch is full, its later records (and so every later record
    of its keys) wait for the next poll, while the other batches go on filling, as Lambda's lanes
    fill independently. What waits is returned by neither batch; the caller keeps it, in order.
    """
    groups: list[list[dict[str, Any]]] = [[] for _ in range(max(1, batches))]
    for record in records:
        key = json.dumps((record.get("dynamodb") or {}).get("Keys") or {}, sort_keys=True)
        group = groups[zlib.crc32(key.encode()) % len(groups)]
        if len(group) < batch_size:
            group.append(record)
    return [group for group in groups if group]


def _sequence(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["SequenceNumber"])


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
        clock: monotonic seconds (when to describe the shards again).

    The client's GetRecords answers carry their records unparsed under `WIRE_RECORDS` from then
    on (the hook is registered on `client`): give the poller a client of its own.
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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        client.meta.events.register(_GET_RECORDS_PARSE, _keep_wire_records, unique_id="gco-wire-records")
        self.clock = clock
        self._shards: list[str] = []
        self._described_at = -SHARD_REFRESH_S
        self._iterators: dict[str, str] = {}  # shard -> NextShardIterator, where it continues the checkpoint
        # shard -> records read but held back by a full batch (the first right after the
        # checkpoint; later records of other batches may have been delivered), and the iterator
        # after the last record read
        self._held: dict[str, tuple[list[dict[str, Any]], str | None]] = {}
        self._dead: set[str] = set()  # sequence numbers dead-lettered: never delivered again
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
            if not self._shards or self.clock() - self._described_at >= SHARD_REFRESH_S:
                described = self.client.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
                self._shards = [shard["ShardId"] for shard in described["Shards"][:MAX_SHARDS]]
                self._described_at = self.clock()
            return sum(self._poll_shard(shard) for shard in self._shards)

    def drain(self, max_rounds: int = 50) -> int:
        """Poll until a round delivers nothing (bounded); returns records delivered."""
        total = 0
        for _ in range(max_rounds):
            handled = self.poll_once()
            total += handled
            if handled == 0:
                break
        return total

    def _iterator(self, shard_id: str) -> str:
        """Where the shard's next read starts: right after the checkpoint (or its first record)."""
        continued = self._iterators.pop(shard_id, None)
        if continued is not None:
            return continued
        checkpoint = self.checkpoints.get(shard_id)
        arguments: dict[str, Any] = {"StreamArn": self.stream_arn, "ShardId": shard_id}
        if checkpoint is None:
            arguments["ShardIteratorType"] = "TRIM_HORIZON"
        else:
            arguments.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=checkpoint)
        iterator: str = self.client.get_shard_iterator(**arguments)["ShardIterator"]
        return iterator

    def _read(self, shard_id: str) -> tuple[list[dict[str, Any]], str | None]:
        """The shard's next records in the event's shape (those a full batch held back last time
        first, not read again, then new ones up to the read's limit), and the iterator after the
        last record read."""
        limit = min(MAX_GET_RECORDS, self.batch_size * self.parallelization)
        held, following = self._held.pop(shard_id, ([], None))
        if held and (following is None or len(held) >= limit):
            return held, following
        answer = self.client.get_records(
            ShardIterator=following or self._iterator(shard_id), Limit=limit - len(held)
        )
        wire = answer.get(WIRE_RECORDS)
        event = (
            lambda_event(answer.get("Records") or [], self.stream_arn, self.region)
            if wire is None
            else _wire_event(wire, self.stream_arn, self.region)
        )
        return held + event["Records"], answer.get("NextShardIterator")

    def _poll_shard(self, shard_id: str) -> int:
        records, following = self._read(shard_id)
        if not records:
            if following:  # nothing new: the next read starts where this one did
                self._iterators[shard_id] = following
            return 0
        live = [record for record in records if _sequence(record) not in self._dead]
        batches = partition(live, self.parallelization, self.batch_size)
        if len(batches) == 1:
            failed = self._invoke(batches[0])
        else:
            with ThreadPoolExecutor(max_workers=len(batches)) as pool:
                failed = [seq for found in pool.map(self._invoke, batches) for seq in found]
        delivered = {_sequence(record) for batch in batches for record in batch}
        retried = self._count_failure(records, failed)
        settled = (delivered - retried) | self._dead
        # The checkpoint goes right after the longest settled prefix: before the earliest failure
        # or the first record held for the next poll. After a failure the records after it are
        # read and delivered again (at least once; reconciling is idempotent); otherwise what was
        # held is kept, already read, and nothing delivered is read again.
        cut = next((i for i, record in enumerate(records) if _sequence(record) not in settled), len(records))
        if cut > 0:
            self.checkpoints[shard_id] = _sequence(records[cut - 1])
        if retried:
            return len(delivered)
        waiting = [record for record in records[cut:] if _sequence(record) not in settled]
        if waiting:
            self._held[shard_id] = (waiting, following)
        elif following:  # all delivered: continue after the last one
            self._iterators[shard_id] = following
        return len(delivered)

    def _count_failure(self, records: list[dict[str, Any]], failed: list[str]) -> set[str]:
        """The earliest failed record, counted: the sequence numbers to retry (none once it is
        dead-lettered after `max_retries` failures; the checkpoint then moves past it)."""
        if not failed:
            return set()
        sequences = [_sequence(record) for record in records]
        first = min((sequences.index(seq) for seq in failed if seq in sequences), default=0)
        seq = sequences[first]
        self._failures[seq] = self._failures.get(seq, 0) + 1
        if self._failures[seq] < self.max_retries:
            return {seq}
        log.warning("stream record %s failed %d times: dead-lettered", seq, self._failures[seq])
        self.dead_letters.append(records[first])
        self._dead.add(seq)
        return {s for s in failed if s != seq}

    def _invoke(self, batch: list[dict[str, Any]]) -> list[str]:
        """One invocation; returns the sequence numbers of the records it reports as failed."""
        try:
            response = self.handler({"Records": batch}, None)
            return [item["itemIdentifier"] for item in response.get("batchItemFailures") or []]
        except Exception:  # the invocation died: Lambda retries the whole batch
            log.exception("stream handler failed; the batch will be retried")
            return [batch[0]["dynamodb"]["SequenceNumber"]]
