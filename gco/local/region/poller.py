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
described to it as Lambda describes it (`discarded.py`), with the condition that discarded it.

The mapping's other settings, each off by default as in the mapping:

- `batching_window_s` (MaximumBatchingWindowInSeconds): a lane holds a batch smaller than
  `batch_size` until its oldest queued record has waited that long (by `clock`), reading on
  meanwhile, as Lambda "continues to read records from the event source until it has gathered a
  full batch, the batching window expires, or the batch reaches the payload limit of 6 MB"
  (https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html#dynamodb-polling-and-batching). A
  retry is not held: it is the batch Lambda has, not one it gathers.
- `bisect_on_error` (BisectBatchOnFunctionError): a batch whose handler raised is split in two and
  each half delivered on its own, and so on down to one record; "splitting batches doesn't consume
  the retry quota" (https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html), so
  only a record that fails alone counts its failures toward `max_retries`. A partial batch response
  is not a function error and is never bisected.
- `maximum_record_age_s` (MaximumRecordAgeInSeconds, -1 infinite): a record older than that (its
  `ApproximateCreationDateTime` against `now`) is discarded before it is delivered, at its first
  delivery or any retry, with the condition `RecordAgeExceeded` (`RECORD_AGE_EXCEEDED`).
- `max_retries` is MaximumRetryAttempts + 1 (the first attempt and its retries); a negative one is
  MaximumRetryAttempts -1: retried until the record is too old (or forever without a maximum age).

What it does not model: Lambda's payload limit (6 MB).
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
from gco.local.region.discarded import RECORD_AGE_EXCEEDED, RETRIES_EXHAUSTED, failure_record

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


def _created(record: dict[str, Any]) -> float | None:
    """The record's ApproximateCreationDateTime in epoch seconds (None where it has none)."""
    created = (record.get("dynamodb") or {}).get("ApproximateCreationDateTime")
    return None if created is None else float(created)


@dataclass(frozen=True)
class _Outcome:
    """What one invocation returned: the records it reported as failed, and whether the handler
    raised (a function error, all of the batch failed) rather than answering."""

    failed: list[str]
    raised: bool = False


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
        arrived: when (by the poller's clock) each record waiting in a lane was read: the batching
            window runs from its lane's oldest.
        retrying: the lanes whose queue starts with records to deliver again (a retry or the halves
            of a bisected batch): not held for the batching window.
        splits: per lane, the sizes of the next batches to take, in order: the halves of a bisected
            batch, each delivered on its own.
        following: GetRecords' NextShardIterator after the last record read (None: start after the
            checkpoint).
        closed: the shard is closed and read to its end (GetRecords answered no NextShardIterator,
            https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_GetRecords.html):
            it is not read again.
    """

    queues: list[deque[dict[str, Any]]]
    flights: dict[Future[_Outcome], _Flight] = field(default_factory=dict)
    unsettled: deque[str] = field(default_factory=deque)
    settled: set[str] = field(default_factory=set)
    arrived: dict[str, float] = field(default_factory=dict)
    retrying: set[int] = field(default_factory=set)
    splits: dict[int, deque[int]] = field(default_factory=dict)
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
        max_retries: failures of a record (or of its batch, when the handler raised) before it is
            dead-lettered: Lambda's MaximumRetryAttempts + 1. Negative: no limit (MaximumRetryAttempts
            -1: retried until it is older than `maximum_record_age_s`).
        batching_window_s: Lambda's MaximumBatchingWindowInSeconds: how long (by `clock`) a lane holds
            a batch smaller than `batch_size` for more records, from the read of its oldest queued
            record. 0: none is held.
        bisect_on_error: Lambda's BisectBatchOnFunctionError: a batch whose handler raised is split in
            two halves, each delivered on its own, without counting as a failure of its records.
        maximum_record_age_s: Lambda's MaximumRecordAgeInSeconds: a record older than that (by `now`)
            is discarded instead of delivered (`RecordAgeExceeded`). Negative (-1): none is too old.
        clock: monotonic seconds (when to describe the shards again, the batching window).
        now: epoch seconds (a record's age, against its ApproximateCreationDateTime).

    Two ways to drive it: `poll_once` (one read, one batch of each lane that has a batch ready, all
    waited for: deterministic, for tests and `LocalReconcilers.pump`) and `run` (what Lambda's
    pollers do: a lane whose batch returned takes its next batch at once, without waiting for the
    other lanes, and reads go on while batches run).

    A failed record (reported in `batchItemFailures`, or the first record of a batch whose handler
    raised) is delivered again with the records after it in its batch, first in its lane, as Lambda
    retries a batch from the failed record; after `max_retries` failures it goes to the dead
    letters and its lane goes on. With `bisect_on_error`, a batch of more than one record whose
    handler raised is delivered again as two halves instead, and nothing is counted. The checkpoint
    goes right after the longest prefix of the records read that are settled (delivered without
    failing, or dead-lettered).

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
        batching_window_s: float = 0,
        bisect_on_error: bool = False,
        maximum_record_age_s: float = -1,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        client.meta.events.register(_GET_RECORDS_PARSE, _keep_wire_records, unique_id="gco-wire-records")
        self.clock = clock
        self.now = now
        self._shard_ids: list[str] = []
        self._described_at = -SHARD_REFRESH_S
        self._shards: dict[str, _ShardState] = {}
        self.stream_arn = stream_arn
        self.handler = handler
        self.region = region
        self.batch_size = batch_size
        self.parallelization = max(1, min(MAX_PARALLELIZATION, parallelization))
        self.max_retries = max_retries
        self.batching_window_s = batching_window_s
        self.bisect_on_error = bisect_on_error
        self.maximum_record_age_s = maximum_record_age_s
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
        """One read of each shard and one batch of each lane that is ready (`_ready`), all waited
        for; returns the records delivered."""
        with self._lock:
            self._describe()
            delivered = 0
            for shard_id in self._shard_ids:
                state = self._state(shard_id)
                self._read(shard_id, state)
                delivered += self._start(shard_id, state)
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
        queued (or gathering a batch in its batching window), start every idle lane that is ready,
        settle each batch as it returns. Waits `idle_wait` (or until a batch returns, or a held
        batch's window is over) when there is nothing to start. A read that fails is logged and
        tried again after `idle_wait`; batches in flight are waited for on stop.

        The poller's lock is held for each step and each settling, not while batches run, so a
        `poll_once` from another thread (`LocalReconcilers.pump`) goes in between."""
        while not stop.is_set():
            with self._lock:
                try:
                    started = self._step()
                    timeout = self._idle_wait(idle_wait)
                except Exception:  # the next step retries (a dead poller would stop the Region)
                    log.exception("stream poll failed; retrying")
                    started, timeout = 0, idle_wait
                flights = self._flights()
            if flights:
                done, _ = wait(flights, timeout=timeout, return_when=FIRST_COMPLETED)
                with self._lock:
                    for future in done:
                        self._settle(flights[future], future)
            elif started == 0:
                stop.wait(timeout)
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
        """Read where a lane is starved or gathering, then start every idle lane's next batch;
        returns the records started."""
        self._describe()
        started = 0
        now = self.clock()
        for shard_id in self._shard_ids:
            state = self._state(shard_id)
            busy = state.busy()
            if any(
                lane not in busy and (not queue or not self._ready(state, lane, now))
                for lane, queue in enumerate(state.queues)
            ):
                self._read(shard_id, state)
            started += self._start(shard_id, state)
        return started

    def _idle_wait(self, idle_wait: float) -> float:
        """How long `run` waits with nothing to start: `idle_wait`, less where an idle lane holds a
        batch whose batching window is over sooner (it is started then, not an idle wait later)."""
        if self.batching_window_s <= 0:
            return idle_wait
        now = self.clock()
        waits = [idle_wait]
        for state in self._shards.values():
            busy = state.busy()
            for lane, queue in enumerate(state.queues):
                if queue and lane not in busy:  # held: a ready one was started by the step before
                    since = state.arrived.get(_sequence(queue[0]), now)
                    waits.append(max(0.0, since + self.batching_window_s - now))
        return min(waits)

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
        read_at = self.clock()
        for record in event["Records"]:
            state.unsettled.append(_sequence(record))
            if not passes(record, self.filters):  # dropped, the checkpoint moves past it
                state.settled.add(_sequence(record))
                self.filtered += 1
                continue
            if self.batching_window_s > 0:  # the window runs from here
                state.arrived[_sequence(record)] = read_at
            state.queues[lane_of(record, self.parallelization)].append(record)
        self._advance(shard_id, state)

    # -- delivering ----------------------------------------------------------------------------------

    def _start(self, shard_id: str, state: _ShardState) -> int:
        """The next batch of each idle lane that is ready, on the pool, once the records too old to
        deliver are discarded; returns the records started."""
        busy = state.busy()
        now = self.clock()
        started = 0
        for lane, queue in enumerate(state.queues):
            if lane in busy:
                continue
            self._expire(shard_id, state, lane)
            if not queue or not self._ready(state, lane, now):
                continue
            batch = [queue.popleft() for _ in range(self._next_size(state, lane))]
            state.retrying.discard(lane)
            state.flights[self._executor().submit(self._invoke, batch)] = _Flight(lane, batch)
            started += len(batch)
        return started

    def _ready(self, state: _ShardState, lane: int, now: float) -> bool:
        """Whether a lane's queued records make a batch at `now` (by `clock`): a retry or a bisected
        half, a full batch, or a batching window that is over.

        https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html#dynamodb-polling-and-batching:
        the event source can be told "to buffer records for up to 5 minutes by configuring a batching
        window", and Lambda invokes the function once it "has gathered a full batch, the batching
        window expires, or the batch reaches the payload limit of 6 MB" (the payload limit is not
        modelled).
        """
        if self.batching_window_s <= 0 or lane in state.retrying or lane in state.splits:
            return True
        queue = state.queues[lane]
        if len(queue) >= self.batch_size:
            return True
        return now - state.arrived.get(_sequence(queue[0]), now) >= self.batching_window_s

    def _next_size(self, state: _ShardState, lane: int) -> int:
        """How many records the lane's next batch takes: the next half of a bisected batch, else up to
        `batch_size`."""
        queued = len(state.queues[lane])
        splits = state.splits.get(lane)
        if not splits:
            return min(self.batch_size, queued)
        size = splits.popleft()
        if not splits:
            del state.splits[lane]
        return min(size, queued)

    def _expire(self, shard_id: str, state: _ShardState, lane: int) -> None:
        """Discard the records at the head of a lane that are older than `maximum_record_age_s`: Lambda
        discards a record past MaximumRecordAgeInSeconds, before its first delivery or any retry,
        instead of delivering it (https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html).
        A lane's records are in stream order, so the oldest are first."""
        if self.maximum_record_age_s < 0:
            return
        queue = state.queues[lane]
        now = self.now()
        expired = False
        while queue and self._too_old(queue[0], now):
            self._dead_letter(shard_id, state, queue.popleft(), RECORD_AGE_EXCEEDED)
            expired = True
        if expired:
            # The halves of a bisected batch no longer hold what they held: what is left of them goes
            # again as one retry.
            state.splits.pop(lane, None)
            if not queue:
                state.retrying.discard(lane)
            self._advance(shard_id, state)

    def _too_old(self, record: dict[str, Any], now: float) -> bool:
        created = _created(record)
        return created is not None and now - created > self.maximum_record_age_s

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self.parallelization * MAX_SHARDS, thread_name_prefix="lane"
            )
        return self._pool

    def _flights(self) -> dict[Future[_Outcome], str]:
        """Every batch in flight, with its shard."""
        return {future: shard_id for shard_id, state in self._shards.items() for future in state.flights}

    def _settle(self, shard_id: str, future: Future[_Outcome]) -> None:
        """A returned batch: bisected if its handler raised and `bisect_on_error` (more than one
        record), else what did not fail is settled and a failure is retried or dead-lettered (`_retry`);
        the checkpoint moves on. A batch settled already (by the other driver, `run` or `poll_once`) is
        left alone."""
        state = self._shards[shard_id]
        flight = state.flights.pop(future, None)
        if flight is None:
            return
        outcome = future.result()
        if outcome.raised and self.bisect_on_error and len(flight.batch) > 1:
            self._bisect(state, flight)
        else:
            self._retry(shard_id, state, flight, set(outcome.failed))
        self._advance(shard_id, state)

    def _retry(self, shard_id: str, state: _ShardState, flight: _Flight, failed: set[str]) -> None:
        """The records before the first failed one are settled; it is delivered again (with the records
        after it in the batch) first in its lane, or dead-lettered at its `max_retries`-th failure."""
        sequences = [_sequence(record) for record in flight.batch]
        first = next((i for i, seq in enumerate(sequences) if seq in failed), len(sequences))
        state.settled.update(sequences[:first])
        retry = flight.batch[first:]
        if not retry:
            return
        seq = sequences[first]
        self._failures[seq] = self._failures.get(seq, 0) + 1
        if 0 <= self.max_retries <= self._failures[seq]:
            self._dead_letter(shard_id, state, retry[0], RETRIES_EXHAUSTED)
            retry = retry[1:]
        self._requeue(state, flight.lane, retry)

    def _bisect(self, state: _ShardState, flight: _Flight) -> None:
        """A batch whose handler raised, delivered again as two halves, each on its own, first in its
        lane; no failure is counted.

        https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html: BisectBatchOnFunctionError
        "splits a failed batch into two smaller batches, isolating bad records"; "Splitting batches
        doesn't consume the retry quota". Only a function error splits a batch (not a partial batch
        response), and a record that fails alone is counted as any retry is.
        """
        first = (len(flight.batch) + 1) // 2
        log.info("stream batch of %d records bisected after a function error", len(flight.batch))
        state.queues[flight.lane].extendleft(reversed(flight.batch))
        state.retrying.add(flight.lane)
        state.splits.setdefault(flight.lane, deque()).extendleft([len(flight.batch) - first, first])

    def _requeue(self, state: _ShardState, lane: int, records: list[dict[str, Any]]) -> None:
        """Records to deliver again, first in their lane; a retry within a bisected batch's half stays
        a batch of its own (the other half waits its turn)."""
        if not records:
            return
        state.queues[lane].extendleft(reversed(records))
        state.retrying.add(lane)
        splits = state.splits.get(lane)
        if splits:
            splits.appendleft(len(records))

    def _dead_letter(self, shard_id: str, state: _ShardState, record: dict[str, Any], condition: str) -> None:
        """Discard a record: kept in `dead_letters`, settled (the checkpoint moves past it) and told to
        the on-failure destination with the condition that discarded it."""
        seq = _sequence(record)
        attempts = self._failures.get(seq, 0)
        log.warning("stream record %s discarded (%s) after %d failures", seq, condition, attempts)
        self.dead_letters.append(record)
        state.settled.add(seq)
        self._discard(shard_id, record, attempts, condition)

    def _discard(self, shard_id: str, record: dict[str, Any], attempts: int, condition: str) -> None:
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
            condition=condition,
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
            state.arrived.pop(last, None)
        if last is not None:
            self.checkpoints[shard_id] = last

    def _invoke(self, batch: list[dict[str, Any]]) -> _Outcome:
        """One invocation: the records it reports as failed, or, where the handler raised (a function
        error), the batch's first record and `raised`."""
        try:
            response = self.handler({"Records": batch}, None)
            return _Outcome([item["itemIdentifier"] for item in response.get("batchItemFailures") or []])
        except Exception:  # the invocation died: Lambda retries the whole batch (or bisects it)
            log.exception("stream handler failed; the batch will be retried")
            return _Outcome([_sequence(batch[0])], raised=True)
