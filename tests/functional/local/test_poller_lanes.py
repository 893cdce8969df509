"""The stream poller's lanes (`StreamPoller.run`), as Lambda's parallelization factor runs a shard's
batches: a lane whose batch returned takes its next at once while a slow lane is still busy, one
endpoint's records stay in order in one lane, a failed record is retried in its lane then
dead-lettered, and the checkpoint never passes a record that is not settled. Waits are on events
the handler sets, never on a clock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gco import aws
from gco.endpoints import EndpointStore
from gco.local.moto.motoserver import MotoServer
from gco.local.region.poller import StreamPoller, lane_of
from tests.unit.reconcile.records import EAST, IMAGE

SPEC: dict[str, Any] = {"image": IMAGE, "model_id": "m"}
LANES = 2
WAIT_S = 30.0  # a bound on every wait below, never reached when the poller works


def key_record(name: str) -> dict[str, Any]:
    return {"dynamodb": {"Keys": {"endpoint_name": {"S": name}}}}


def names_in_lane(lane: int, count: int) -> list[str]:
    names = (f"ep-{index}" for index in range(1000))
    return [name for name in names if lane_of(key_record(name), LANES) == lane][:count]


def name_of(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["Keys"]["endpoint_name"]["S"])


@contextmanager
def running(poller: StreamPoller) -> Iterator[threading.Event]:
    stop = threading.Event()
    thread = threading.Thread(target=poller.run, args=(stop, 0.01), daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join(WAIT_S)
        poller.close()
    assert not thread.is_alive()


def poller_for(
    store: EndpointStore, moto: MotoServer, handler: Callable[..., dict[str, Any]], **options: Any
) -> StreamPoller:
    client = aws.client("dynamodbstreams", endpoint_url=moto.url)
    arn = store.client.describe_table(TableName=store.table_name)["Table"]["LatestStreamArn"]
    return StreamPoller(client, arn, handler, region=EAST, parallelization=LANES, **options)


def test_a_lane_goes_on_while_another_lane_is_busy(store: EndpointStore, moto: MotoServer) -> None:
    """Lane 0's first batch blocks until lane 1 has delivered two batches, one after the other: with
    a poll that waits for all its batches, lane 1's second batch could never start."""
    slow = names_in_lane(0, 1)[0]
    fast = names_in_lane(1, 2)
    seen: list[str] = []
    first_fast, second_fast = threading.Event(), threading.Event()

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        names = [name_of(record) for record in event["Records"]]
        seen.extend(names)
        if fast[0] in names:
            first_fast.set()
        if slow in names:
            assert second_fast.wait(WAIT_S), "lane 1 never took its next batch while lane 0 was busy"
        if fast[1] in names:
            second_fast.set()
        return {"batchItemFailures": []}

    poller = poller_for(store, moto, handler, batch_size=1)
    store.create(slow, SPEC, [EAST])
    store.create(fast[0], SPEC, [EAST])
    with running(poller):
        # fast[1] is written once both first batches started: it is read while lane 0 is busy
        assert first_fast.wait(WAIT_S)
        store.create(fast[1], SPEC, [EAST])
        assert second_fast.wait(WAIT_S)
    assert sorted(seen) == sorted([slow, *fast])
    assert poller.dead_letters == []


def test_records_of_one_endpoint_stay_in_order_and_the_checkpoint_waits_for_the_slow_lane(
    store: EndpointStore, moto: MotoServer
) -> None:
    """Batches of one record: the slow endpoint's second record waits for its first to return
    (same lane), the other lane's record is delivered meanwhile, and the checkpoint stays before the
    slow endpoint's first record until it returns."""
    slow = names_in_lane(0, 1)[0]
    other = names_in_lane(1, 1)[0]
    order: list[tuple[str, str]] = []
    release, other_done, slow_modified = threading.Event(), threading.Event(), threading.Event()

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        (record,) = event["Records"]
        order.append((name_of(record), record["eventName"]))
        if (name_of(record), record["eventName"]) == (slow, "INSERT"):
            assert release.wait(WAIT_S)
        if name_of(record) == other:
            other_done.set()
        if (name_of(record), record["eventName"]) == (slow, "MODIFY"):
            slow_modified.set()
        return {"batchItemFailures": []}

    poller = poller_for(store, moto, handler, batch_size=1)
    lifecycle = store.create(slow, SPEC, [EAST]).lifecycle_id
    store.create(other, SPEC, [EAST])
    assert lifecycle is not None and store.scale(slow, 2, lifecycle) is not None
    with running(poller):
        assert other_done.wait(WAIT_S)
        while_busy = (list(order), dict(poller.checkpoints))
        release.set()
        assert slow_modified.wait(WAIT_S)
    busy_order, busy_checkpoints = while_busy
    assert sorted(busy_order) == sorted([(slow, "INSERT"), (other, "INSERT")]) and busy_checkpoints == {}
    assert [event for name, event in order if name == slow] == ["INSERT", "MODIFY"]
    assert len(poller.checkpoints) == 1


def test_a_failing_record_is_retried_in_its_lane_then_dead_lettered(
    store: EndpointStore, moto: MotoServer
) -> None:
    failing = names_in_lane(0, 1)[0]
    others = names_in_lane(1, 3)
    delivered: list[str] = []
    lock = threading.Lock()
    all_seen = threading.Event()

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        with lock:
            delivered.extend(name_of(record) for record in event["Records"])
            if delivered.count(failing) >= 3 and set(others) <= set(delivered):
                all_seen.set()
        return {
            "batchItemFailures": [
                {"itemIdentifier": record["dynamodb"]["SequenceNumber"]}
                for record in event["Records"]
                if name_of(record) == failing
            ]
        }

    poller = poller_for(store, moto, handler, batch_size=2, max_retries=3)
    for name in [failing, *others]:
        store.create(name, SPEC, [EAST])
    with running(poller):
        assert all_seen.wait(WAIT_S)
    assert delivered.count(failing) == 3
    assert sorted(name for name in delivered if name != failing) == sorted(others)
    assert [name_of(record) for record in poller.dead_letters] == [failing]
