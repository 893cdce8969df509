"""A DynamoDB-stream poller for the local stack: what Lambda's event source mapping does in AWS.

It reads the table's stream (`dynamodbstreams` on the moto server), hands the handler the very
event shape Lambda would (`{"Records": [...]}` with `eventSourceARN`, `awsRegion`, low-level
attribute values, epoch `ApproximateCreationDateTime`), and honours the partial batch response:
the checkpoint advances past every record before the first one not yet settled; a failed record
is delivered again (with the records after it in its batch) until it succeeds or has failed
`max_retries` times (or its batch's handler raised that often), then goes to the dead letters and
the checkpoint moves past it. As the mapping does with a parallelization factor ("Lambda processes
up to 10 batches in each shard simultaneously ... in-order processing at the item (partition and
sort key) level", https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html#services-ddb-
parallelization), each record goes to a lane by its partition key (the endpoint), each lane has one
batch in flight at most, and `run` lets each lane take its next batch as soon as its last one
returned, whatever the other lanes are doing. One poller per Region stands in for that Region's
replica stream and its event source mapping.

What is Lambda's cost and not the function's is kept cheap here, as the managed pollers are to the
function: GetRecords' records are handed on as the JSON protocol wrote them (a `before-parse`
hook keeps botocore's parser, which walks every attribute value of both images of every record,
off them: the wire form is already the event's), each read continues from the last one's
`NextShardIterator` (records waiting in a lane, or to be retried, are kept, not read again), and
the shard list is described again only every `SHARD_REFRESH_S`.

Before the lanes, every poll waited for all of its batches: at 1,000 endpoints written within 15 s
a Region's rounds took 1.0-1.7 s, the longest batch of each round plus its read, while the lanes
whose batch had returned waited idle (`docs/scale.md`, "The ninth pass").

With `filters` (the mapping's `FilterCriteria` patterns), a record that matches none is dropped as
Lambda drops it: never delivered, and the checkpoint moves past it (`gco.deployment.event_filter`
holds Lambda's filter rules; the local stack reads the patterns from the synthesized mapping).

A discarded record is kept in `dead_letters` and, with `on_failure` (the mapping's destination),
described to it as Lambda describes it (`discarded.py`).

What it does not model: Lambda's batching window and payload limit (6 MB), bisecting a failed
batch, and a record's maximum age.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gco.deployment.event_filter import passes
from gco.local.region.discarded import failure_record

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


def lane_of(record: dict[str, Any], lanes: int) -> int:
    """The lane of a record: by its partition key (the endpoint), so one endpoint's records keep
    their order, as Lambda keeps a partition key's records in order with a parallelization factor."""
    key = json.dumps((record.get("dynamodb") or {}).get("Keys") or {}, sort_keys=True)
    return zlib.crc32(key.encode()) % max(1, lanes)


def _sequence(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["SequenceNumber"])


@dataclass(eq=False)
class _Flight:
    """One batch in flight: its lane and records, in order."""

    lane: int
    batch: list[dict[str, Any]]


@dataclass(eq=False)
class _ShardState:
    """What the poller holds of one shard between reads.

    Fields:
        queues: per lane, the records read and not yet delivered (or delivered and to be retried),
            in stream order.
        flights: the batches in flight, by their future.
        unsettled: the sequence numbers read and not yet settled, in stream order (the checkpoint
            goes right before the first of them).
        settled: those of `unsettled` that were delivered and did not fail, or were dead-lettered.
        following: GetRecords' NextShardIterator after the last record read (None: start after the
            checkpoint).
        closed: the shard is closed and read to its end (GetRecords answered no NextShardIterator,
            https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_GetRecords.html):
            it is not read again.
    """

    queues: list[deque[dict[str, Any]]]
    flights: dict[Future[list[str]], _Flight] = field(default_factory=dict)
    unsettled: deque[str] = field(default_factory=deque)
    settled: set[str] = field(default_factory=set)
    following: str | None = None
    closed: bool = False

    def queued(self) -> int:
        return sum(len(queue) for queue in self.queues)

    def busy(self) -> set[int]:
        return {flight.lane for flight in self.flights.values()}


class StreamPoller:
    """Polls every shard of one stream and invokes `handler` per batch, in lanes.

    Parameters:
        client: a `dynamodbstreams` boto3 client.
        stream_arn: the table's LatestStreamArn.
        handler: called as `handler(event, context)`, returns `{"batchItemFailures": [...]}`.
        batch_size: records per invocation (Lambda's BatchSize).
        parallelization: lanes per shard (Lambda's ParallelizationFactor): each record goes to the
            lane of its partition key (`lane_of`), each lane has at most one batch in flight, so the
            records of one endpoint stay in order while the lanes go on independently.
        max_retries: attempts of a failing record or batch before it is dead-lettered.
        clock: monotonic seconds (when to describe the shards again).

    Two ways to drive it: `poll_once` (one read, one batch of each lane that has records, all
    waited for: deterministic, for tests and `LocalReconcilers.pump`) and `run` (what Lambda's
    pollers do: a lane whose batch returned takes its next batch at once, without waiting for the
    other lanes, and reads go on while batches run).

    A failed record (reported in `batchItemFailures`, or the first record of a batch whose handler
    raised) is delivered again with the records after it in its batch, first in its lane, as Lambda
    retries a batch from the failed record; after `max_retries` failures it goes to the dead
    letters and its lane goes on. The checkpoint goes right after the longest prefix of the records
    read that are settled (delivered without failing, or dead-lettered).

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
        filters: Sequence[Mapping[str, Any]] = (),
        on_failure: Callable[[dict[str, Any]], None] | None = None,
        function_arn: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        client.meta.events.register(_GET_RECORDS_PARSE, _keep_wire_records, unique_id="gco-wire-records")
        self.clock = clock
        self._shard_ids: list[str] = []
        self._described_at = -SHARD_REFRESH_S
        self._shards: dict[str, _ShardState] = {}
        self.stream_arn = stream_arn
        self.handler = handler
        self.region = region
        self.batch_size = batch_size
        self.parallelization = max(1, min(MAX_PARALLELIZATION, parallelization))
        self.max_retries = max_retries
        self.filters = tuple(filters)
        # The mapping's on-failure destination (`discarded.sqs_destination`): told of each discarded record.
        self.on_failure = on_failure
        self.function_arn = function_arn
        self.filtered = 0  # records the filters dropped
        self.checkpoints: dict[str, str | None] = {}
        self.dead_letters: list[dict[str, Any]] = []
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    # -- driving -----------------------------------------------------------------------------------

    def poll_once(self) -> int:
        """One read of each shard and one batch of each lane that has records, all waited for;
        returns the records delivered."""
        with self._lock:
            self._describe()
            delivered = 0
            for shard_id in self._shard_ids:
                state = self._state(shard_id)
                self._read(shard_id, state)
                delivered += self._start(state)
            flights = self._flights()
            wait(flights)
            for future, shard_id in flights.items():
                self._settle(shard_id, future)
            return delivered

    def drain(self, max_rounds: int = 50) -> int:
        """Poll until a round delivers nothing (bounded); returns records delivered."""
        total = 0
        for _ in range(max_rounds):
            handled = self.poll_once()
            total += handled
            if handled == 0:
                break
        return total

    def run(self, stop: threading.Event, idle_wait: float) -> None:
        """Poll until `stop` is set, each lane on its own: read while a lane is idle with nothing
        queued, start every idle lane that has records, settle each batch as it returns. Waits
        `idle_wait` (or until a batch returns) when there is nothing to start. A read that fails
        is logged and tried again after `idle_wait`; batches in flight are waited for on stop.

        The poller's lock is held for each step and each settling, not while batches run, so a
        `poll_once` from another thread (`LocalReconcilers.pump`) goes in between."""
        while not stop.is_set():
            with self._lock:
                try:
                    started = self._step()
                except Exception:  # the next step retries (a dead poller would stop the Region)
                    log.exception("stream poll failed; retrying")
                    started = 0
                flights = self._flights()
            if flights:
                done, _ = wait(flights, timeout=idle_wait, return_when=FIRST_COMPLETED)
                with self._lock:
                    for future in done:
                        self._settle(flights[future], future)
            elif started == 0:
                stop.wait(idle_wait)
        with self._lock:
            flights = self._flights()
        wait(flights)
        with self._lock:
            for future, shard_id in flights.items():
                self._settle(shard_id, future)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _step(self) -> int:
        """Read where a lane is starved, then start every idle lane's next batch; returns the
        records started."""
        self._describe()
        started = 0
        for shard_id in self._shard_ids:
            state = self._state(shard_id)
            busy = state.busy()
            if any(lane not in busy and not queue for lane, queue in enumerate(state.queues)):
                self._read(shard_id, state)
            started += self._start(state)
        return started

    # -- reading -------------------------------------------------------------------------------------

    def _describe(self) -> None:
        if not self._shard_ids or self.clock() - self._described_at >= SHARD_REFRESH_S:
            described = self.client.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
            self._shard_ids = [shard["ShardId"] for shard in described["Shards"][:MAX_SHARDS]]
            self._described_at = self.clock()

    def _state(self, shard_id: str) -> _ShardState:
        state = self._shards.get(shard_id)
        if state is None:
            state = self._shards[shard_id] = _ShardState([deque() for _ in range(self.parallelization)])
        return state

    def _iterator(self, shard_id: str) -> str:
        """Where the shard's first read starts: right after the checkpoint (or its first record)."""
        checkpoint = self.checkpoints.get(shard_id)
        arguments: dict[str, Any] = {"StreamArn": self.stream_arn, "ShardId": shard_id}
        if checkpoint is None:
            arguments["ShardIteratorType"] = "TRIM_HORIZON"
        else:
            arguments.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=checkpoint)
        iterator: str = self.client.get_shard_iterator(**arguments)["ShardIterator"]
        return iterator

    def _read(self, shard_id: str, state: _ShardState) -> None:
        """The shard's next records, up to the read's limit less what is queued, each to its lane.

        A read continues from the last one's NextShardIterator: nothing read is read again (a
        record to retry waits in its lane).
        """
        room = min(MAX_GET_RECORDS, self.batch_size * self.parallelization) - state.queued()
        if room <= 0 or state.closed:
            return
        answer = self.client.get_records(
            ShardIterator=state.following or self._iterator(shard_id), Limit=room
        )
        state.following = answer.get("NextShardIterator")
        state.closed = state.following is None
        wire = answer.get(WIRE_RECORDS)
        event = (
            lambda_event(answer.get("Records") or [], self.stream_arn, self.region)
            if wire is None
            else _wire_event(wire, self.stream_arn, self.region)
        )
        for record in event["Records"]:
            state.unsettled.append(_sequence(record))
            if not passes(record, self.filters):  # dropped, the checkpoint moves past it
                state.settled.add(_sequence(record))
                self.filtered += 1
                continue
            state.queues[lane_of(record, self.parallelization)].append(record)
        self._advance(shard_id, state)

    # -- delivering ----------------------------------------------------------------------------------

    def _start(self, state: _ShardState) -> int:
        """The next batch of each idle lane that has records, on the pool; returns records started."""
        busy = state.busy()
        started = 0
        for lane, queue in enumerate(state.queues):
            if lane in busy or not queue:
                continue
            batch = [queue.popleft() for _ in range(min(self.batch_size, len(queue)))]
            state.flights[self._executor().submit(self._invoke, batch)] = _Flight(lane, batch)
            started += len(batch)
        return started

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self.parallelization * MAX_SHARDS, thread_name_prefix="lane"
            )
        return self._pool

    def _flights(self) -> dict[Future[list[str]], str]:
        """Every batch in flight, with its shard."""
        return {future: shard_id for shard_id, state in self._shards.items() for future in state.flights}

    def _settle(self, shard_id: str, future: Future[list[str]]) -> None:
        """A returned batch: what did not fail is settled; a failure is retried first in its lane
        (with the records after it in the batch) or dead-lettered; the checkpoint moves on. A batch
        settled already (by the other driver, `run` or `poll_once`) is left alone."""
        state = self._shards[shard_id]
        flight = state.flights.pop(future, None)
        if flight is None:
            return
        failed = set(future.result())
        sequences = [_sequence(record) for record in flight.batch]
        first = next((i for i, seq in enumerate(sequences) if seq in failed), len(sequences))
        state.settled.update(sequences[:first])
        retry = flight.batch[first:]
        if retry:
            seq = sequences[first]
            self._failures[seq] = self._failures.get(seq, 0) + 1
            if self._failures[seq] >= self.max_retries:
                log.warning("stream record %s failed %d times: dead-lettered", seq, self._failures[seq])
                self.dead_letters.append(retry[0])
                self._discard(shard_id, retry[0], self._failures[seq])
                state.settled.add(seq)
                retry = retry[1:]
            state.queues[flight.lane].extendleft(reversed(retry))
        self._advance(shard_id, state)

    def _discard(self, shard_id: str, record: dict[str, Any], attempts: int) -> None:
        """Tell the on-failure destination of a discarded record, as Lambda does (`discarded.py`); a
        destination that fails is logged, and the record is discarded all the same."""
        if self.on_failure is None:
            return
        document = failure_record(
            [record],
            shard_id=shard_id,
            stream_arn=self.stream_arn,
            function_arn=self.function_arn,
            attempts=attempts,
        )
        try:
            self.on_failure(document)
        except Exception:
            log.exception(
                "the on-failure destination refused the record of %s", document["DDBStreamBatchInfo"]
            )

    def _advance(self, shard_id: str, state: _ShardState) -> None:
        """The checkpoint past every settled record before the first one not yet settled."""
        last = None
        while state.unsettled and state.unsettled[0] in state.settled:
            last = state.unsettled.popleft()
            state.settled.discard(last)
        if last is not None:
            self.checkpoints[shard_id] = last

    def _invoke(self, batch: list[dict[str, Any]]) -> list[str]:
        """One invocation; returns the sequence numbers of the records it reports as failed."""
        try:
            response = self.handler({"Records": batch}, None)
            return [item["itemIdentifier"] for item in response.get("batchItemFailures") or []]
        except Exception:  # the invocation died: Lambda retries the whole batch
            log.exception("stream handler failed; the batch will be retried")
            return [batch[0]["dynamodb"]["SequenceNumber"]]
