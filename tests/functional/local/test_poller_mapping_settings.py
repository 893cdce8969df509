"""The stream poller's models of three event source mapping settings the synthesized template carries:
the batching window (MaximumBatchingWindowInSeconds) holds a small batch until it is over, bisecting
(BisectBatchOnFunctionError) splits a batch whose handler raised until the poison record fails alone,
and the maximum record age (MaximumRecordAgeInSeconds) discards a record instead of delivering it,
telling the on-failure destination why. Time is the poller's injected `clock` and `now`, never a
measurement; the only waits are bounded ones on what the poller does."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from gco import aws
from gco.endpoints import EndpointStore
from gco.local.moto.motoserver import MotoServer
from gco.local.region.discarded import sqs_destination
from gco.local.region.poller import StreamPoller
from tests.unit.reconcile.records import EAST, IMAGE

SPEC: dict[str, Any] = {"image": IMAGE, "model_id": "m"}
WINDOW_S = 5.0
MAX_AGE_S = 60.0
FAR_FUTURE = float(2**40)  # epoch seconds: every record is older than MAX_AGE_S by then
EPOCH = 0.0  # epoch seconds: no record is older than MAX_AGE_S then
WAIT_S = 30.0  # a bound on every wait below, never reached when the poller works
FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:gco-reconciler-stream"


def name_of(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["Keys"]["endpoint_name"]["S"])


def recording(
    batches: list[list[str]], fails: Callable[[list[str]], list[str]] = lambda names: []
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """A handler that records each batch's endpoint names and reports the records `fails` names."""

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        names = [name_of(record) for record in event["Records"]]
        batches.append(names)
        failing = set(fails(names))
        return {
            "batchItemFailures": [
                {"itemIdentifier": record["dynamodb"]["SequenceNumber"]}
                for record in event["Records"]
                if name_of(record) in failing
            ]
        }

    return handler


def poller_for(
    store: EndpointStore, moto: MotoServer, handler: Callable[..., dict[str, Any]], **options: Any
) -> StreamPoller:
    client = aws.client("dynamodbstreams", endpoint_url=moto.url)
    arn = store.client.describe_table(TableName=store.table_name)["Table"]["LatestStreamArn"]
    return StreamPoller(client, arn, handler, region=EAST, function_arn=FUNCTION, **options)


def failure_queue(moto: MotoServer) -> tuple[Any, str]:
    """An SQS client and the URL of a queue for the mapping's on-failure destination."""
    sqs = aws.client("sqs", endpoint_url=moto.url)
    return sqs, sqs.create_queue(QueueName="gco-stream-failures")["QueueUrl"]


def documents(sqs: Any, queue: str) -> list[dict[str, Any]]:
    messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(message["Body"]) for message in messages]


def test_a_batching_window_holds_a_small_batch_until_the_clock_passes_it(
    store: EndpointStore, moto: MotoServer
) -> None:
    """Two records, then a third, in a window of 5 s: nothing is delivered before the oldest has
    waited 5 s by the poller's clock, then the three go in one batch. Without the window the first
    poll delivers the first two."""
    clock = [0.0]
    batches: list[list[str]] = []
    poller = poller_for(
        store, moto, recording(batches), batch_size=10, batching_window_s=WINDOW_S, clock=lambda: clock[0]
    )
    store.create("alpha", SPEC, [EAST])
    store.create("beta", SPEC, [EAST])
    assert poller.poll_once() == 0
    clock[0] = 3.0
    store.create("gamma", SPEC, [EAST])  # read while the lane gathers
    assert poller.poll_once() == 0
    clock[0] = WINDOW_S - 0.1
    assert poller.poll_once() == 0 and batches == []
    clock[0] = WINDOW_S  # the window of alpha, the oldest, is over
    assert poller.poll_once() == 3
    assert batches == [["alpha", "beta", "gamma"]]
    assert poller.poll_once() == 0 and poller.dead_letters == []


def test_a_full_batch_and_a_retry_are_not_held_for_the_window(store: EndpointStore, moto: MotoServer) -> None:
    """A batch of `batch_size` goes at once, as Lambda invokes on a full batch; a failed record's retry
    goes at once too, though smaller than `batch_size` (it is the batch Lambda has, not one it
    gathers); a new record alone waits for its window."""
    clock = [0.0]
    batches: list[list[str]] = []
    failed: set[str] = set()

    def fail_beta_once(names: list[str]) -> list[str]:
        first = "beta" in names and "beta" not in failed
        failed.add("beta")
        return ["beta"] if first else []

    poller = poller_for(
        store,
        moto,
        recording(batches, fail_beta_once),
        batch_size=2,
        batching_window_s=300,
        clock=lambda: clock[0],
    )
    store.create("alpha", SPEC, [EAST])
    store.create("beta", SPEC, [EAST])
    assert poller.poll_once() == 2  # full: not held
    assert poller.poll_once() == 1  # beta's retry, alone: not held
    store.create("gamma", SPEC, [EAST])
    assert poller.poll_once() == 0  # gamma alone waits for its window
    clock[0] = 300.0
    assert poller.poll_once() == 1
    assert batches == [["alpha", "beta"], ["beta"], ["gamma"]]


def test_run_wakes_for_a_held_batch_when_its_window_is_over(store: EndpointStore, moto: MotoServer) -> None:
    """`run` with an idle wait of an hour: it reads again once the held batch's window could be over
    (by its clock), not an hour later, and delivers the batch once the clock has passed the window."""
    window_s = 0.1
    clock = [0.0]
    delivered_at: list[float] = []
    reads = 0
    read_twice, delivered = threading.Event(), threading.Event()

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        delivered_at.append(clock[0])
        delivered.set()
        return {"batchItemFailures": []}

    def count_read(**_: Any) -> None:
        nonlocal reads
        reads += 1
        if reads >= 2:
            read_twice.set()

    poller = poller_for(
        store, moto, handler, batch_size=10, batching_window_s=window_s, clock=lambda: clock[0]
    )
    poller.client.meta.events.register("after-call.dynamodb-streams.GetRecords", count_read)
    store.create("alpha", SPEC, [EAST])
    stop = threading.Event()
    thread = threading.Thread(target=poller.run, args=(stop, 3600.0), daemon=True)
    thread.start()
    try:
        # the second read comes after an idle wait no longer than the window (the clock stands still)
        assert read_twice.wait(WAIT_S), "run waited its idle wait, not the batch's window"
        assert not delivered.is_set()
        clock[0] = window_s
        assert delivered.wait(WAIT_S), "run never started the batch whose window was over"
    finally:
        stop.set()
        thread.join(WAIT_S)
        poller.close()
    assert not thread.is_alive()
    assert delivered_at == [window_s]


def test_bisecting_leaves_the_poison_record_alone_in_the_dead_letters(
    store: EndpointStore, moto: MotoServer
) -> None:
    """A handler that raises on any batch holding `poison`: the batch is split in two, the half
    without it delivered, the half with it split again, until `poison` fails alone, `max_retries`
    times, and is dead-lettered. Splitting counts no failure ("Splitting batches doesn't consume the
    retry quota"); the other records are delivered and none of them is dead-lettered."""
    batches: list[list[str]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        names = [name_of(record) for record in event["Records"]]
        batches.append(names)
        if "poison" in names:
            raise ValueError("the function cannot read poison")
        return {"batchItemFailures": []}

    sqs, queue = failure_queue(moto)
    poller = poller_for(
        store,
        moto,
        handler,
        batch_size=4,
        max_retries=2,
        bisect_on_error=True,
        on_failure=sqs_destination(sqs, queue),
    )
    for name in ("alpha", "beta", "gamma", "poison"):
        store.create(name, SPEC, [EAST])
    assert poller.drain() == 4 + 2 + 2 + 1 + 1 + 1
    assert batches == [
        ["alpha", "beta", "gamma", "poison"],
        ["alpha", "beta"],
        ["gamma", "poison"],
        ["gamma"],
        ["poison"],
        ["poison"],
    ]
    assert [name_of(record) for record in poller.dead_letters] == ["poison"]
    (document,) = documents(sqs, queue)
    assert document["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert document["requestContext"]["approximateInvokeCount"] == 2
    sequence = poller.dead_letters[0]["dynamodb"]["SequenceNumber"]
    assert document["DDBStreamBatchInfo"]["startSequenceNumber"] == sequence
    assert list(poller.checkpoints.values()) == [sequence]  # poison was the last record


def test_an_old_record_is_never_delivered_and_is_reported_as_too_old(
    store: EndpointStore, moto: MotoServer
) -> None:
    """With a maximum age of 60 s and a wall clock far past the record's creation, the record is
    discarded before it is delivered, with the condition Lambda's stream pollers use for age, and
    the checkpoint moves past it; a later record that is not too old is delivered."""
    wall = [FAR_FUTURE]
    batches: list[list[str]] = []
    sqs, queue = failure_queue(moto)
    poller = poller_for(
        store,
        moto,
        recording(batches),
        maximum_record_age_s=MAX_AGE_S,
        on_failure=sqs_destination(sqs, queue),
        now=lambda: wall[0],
    )
    store.create("stale", SPEC, [EAST])
    assert poller.poll_once() == 0
    assert batches == [] and [name_of(record) for record in poller.dead_letters] == ["stale"]
    (document,) = documents(sqs, queue)
    assert document["requestContext"]["condition"] == "RecordAgeExceeded"
    assert document["requestContext"]["approximateInvokeCount"] == 0
    sequence = poller.dead_letters[0]["dynamodb"]["SequenceNumber"]
    assert document["DDBStreamBatchInfo"]["startSequenceNumber"] == sequence
    assert list(poller.checkpoints.values()) == [sequence]

    wall[0] = EPOCH
    store.create("fresh", SPEC, [EAST])
    assert poller.poll_once() == 1
    assert batches == [["fresh"]] and len(poller.dead_letters) == 1


def test_unlimited_retries_end_when_the_record_is_too_old(store: EndpointStore, moto: MotoServer) -> None:
    """`max_retries` -1 (MaximumRetryAttempts -1): a failing record is retried until the record
    expires, here by its maximum age, and is then discarded for its age with the invocations made."""
    wall = [EPOCH]
    batches: list[list[str]] = []
    sqs, queue = failure_queue(moto)
    poller = poller_for(
        store,
        moto,
        recording(batches, lambda names: names),
        max_retries=-1,
        maximum_record_age_s=MAX_AGE_S,
        on_failure=sqs_destination(sqs, queue),
        now=lambda: wall[0],
    )
    store.create("stuck", SPEC, [EAST])
    for _ in range(5):
        assert poller.poll_once() == 1
    assert poller.dead_letters == []
    wall[0] = FAR_FUTURE
    assert poller.poll_once() == 0
    assert batches == [["stuck"]] * 5
    assert [name_of(record) for record in poller.dead_letters] == ["stuck"]
    (document,) = documents(sqs, queue)
    assert document["requestContext"]["condition"] == "RecordAgeExceeded"
    assert document["requestContext"]["approximateInvokeCount"] == 5
