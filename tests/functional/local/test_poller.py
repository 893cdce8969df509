"""The stream poller's own costs stay low without changing what it delivers: records reach the
handler in the Lambda event's shape straight from the wire, every read continues from GetRecords'
next iterator (a failed record is delivered again from what was read, not read again), and the
shard list is described again only after `SHARD_REFRESH_S`. The lanes (`run`) are tested in
`test_poller_lanes.py`."""

from __future__ import annotations

import base64
import json
import zlib
from collections import Counter
from typing import Any

from gco import aws
from gco.endpoints import EndpointStore
from gco.local.moto.motoserver import MotoServer
from gco.local.region.discarded import sqs_destination
from gco.local.region.poller import SHARD_REFRESH_S, StreamPoller
from tests.unit.reconcile.records import EAST, IMAGE

SPEC: dict[str, Any] = {"image": IMAGE, "model_id": "m"}


def counted_client(moto: MotoServer) -> tuple[Any, Counter[str]]:
    """A streams client and the calls it makes, by operation (botocore's before-call event)."""
    client = aws.client("dynamodbstreams", endpoint_url=moto.url)
    calls: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    client.meta.events.register("before-call.dynamodb-streams", count)
    return client, calls


def test_poller_reads_the_wire_form_and_reuses_iterators(store: EndpointStore, moto: MotoServer) -> None:
    now = [0.0]
    delivered: list[dict[str, Any]] = []
    fail: set[str] = set()

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        delivered.extend(event["Records"])
        failures = [
            {"itemIdentifier": r["dynamodb"]["SequenceNumber"]}
            for r in event["Records"]
            if r["dynamodb"]["Keys"]["endpoint_name"]["S"] in fail
        ]
        fail.clear()  # fails its first delivery only
        return {"batchItemFailures": failures}

    client, calls = counted_client(moto)
    arn = store.client.describe_table(TableName=store.table_name)["Table"]["LatestStreamArn"]
    poller = StreamPoller(client, arn, handler, region=EAST, clock=lambda: now[0])
    store.create("alpha", SPEC, [EAST])
    assert poller.poll_once() == 1
    record = delivered[0]
    assert (record["eventSource"], record["awsRegion"], record["eventSourceARN"]) == (
        "aws:dynamodb",
        EAST,
        arn,
    )
    assert isinstance(record["dynamodb"]["ApproximateCreationDateTime"], int | float)  # epoch, as Lambda's
    assert record["dynamodb"]["NewImage"]["endpoint_name"] == {"S": "alpha"}
    assert (calls["DescribeStream"], calls["GetShardIterator"], calls["GetRecords"]) == (1, 1, 1)

    # Fully delivered: the next polls (empty, then one record) continue from the next iterator.
    assert poller.poll_once() == 0
    store.create("beta", SPEC, [EAST])
    assert poller.poll_once() == 1
    assert (calls["DescribeStream"], calls["GetShardIterator"], calls["GetRecords"]) == (1, 1, 3)

    # A failure: the next poll delivers the failed record again, kept in its lane (not read again).
    fail.add("gamma")
    store.create("gamma", SPEC, [EAST])
    assert poller.poll_once() == 1
    assert poller.poll_once() == 1
    assert [r["dynamodb"]["Keys"]["endpoint_name"]["S"] for r in delivered] == [
        "alpha",
        "beta",
        "gamma",
        "gamma",
    ]
    assert calls["GetShardIterator"] == 1 and calls["DescribeStream"] == 1
    assert poller.checkpoints == {next(iter(poller.checkpoints)): delivered[-1]["dynamodb"]["SequenceNumber"]}

    now[0] = SHARD_REFRESH_S  # the shard list is described again after the refresh interval
    assert poller.poll_once() == 0
    assert calls["DescribeStream"] == 2
    assert poller.dead_letters == []


def test_binary_values_reach_the_handler_base64_encoded(store: EndpointStore, moto: MotoServer) -> None:
    """As in Lambda's event: binary attribute values are base64 strings."""
    delivered: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        delivered.extend(event["Records"])
        return {"batchItemFailures": []}

    client, _ = counted_client(moto)
    arn = store.client.describe_table(TableName=store.table_name)["Table"]["LatestStreamArn"]
    store.client.put_item(
        TableName=store.table_name, Item={"endpoint_name": {"S": "raw"}, "blob": {"B": b"\x00\x01"}}
    )
    assert StreamPoller(client, arn, handler, region=EAST).drain() == 1
    assert delivered[0]["dynamodb"]["NewImage"]["blob"] == {"B": base64.b64encode(b"\x00\x01").decode()}


def group_of(name: str, groups: int) -> int:
    key = json.dumps({"endpoint_name": {"S": name}}, sort_keys=True)
    return zlib.crc32(key.encode()) % groups


def test_records_a_full_batch_held_back_are_delivered_next_without_being_read_again(
    store: EndpointStore, moto: MotoServer
) -> None:
    names = [f"ep-{index}" for index in range(40)]
    first = [name for name in names if group_of(name, 2) == 0][:3]
    other = next(name for name in names if group_of(name, 2) == 1)
    delivered: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        delivered.extend(r["dynamodb"]["Keys"]["endpoint_name"]["S"] for r in event["Records"])
        return {"batchItemFailures": []}

    client, calls = counted_client(moto)
    arn = store.client.describe_table(TableName=store.table_name)["Table"]["LatestStreamArn"]
    poller = StreamPoller(client, arn, handler, region=EAST, batch_size=2, parallelization=2)
    for name in [*first, other]:
        store.create(name, SPEC, [EAST])
    # The third of group 0 overflows its batch and waits; group 1's batch goes on: `other` is
    # delivered past it.
    assert poller.poll_once() == 3
    assert sorted(delivered) == sorted([*first[:2], other])
    assert poller.checkpoints  # right after the second of group 0, before the one waiting
    # The one waiting comes from what was read (a read continues after the last record read, for
    # new records only: nothing delivered is read or delivered again).
    store.create("late", SPEC, [EAST])
    assert poller.poll_once() == 2
    assert sorted(delivered) == sorted([*first, other, "late"]) and len(delivered) == 5
    assert calls["GetRecords"] == 2 and calls["GetShardIterator"] == 1
    assert poller.poll_once() == 0 and calls["GetRecords"] == 3


def test_a_failure_after_a_held_record_is_retried_then_dead_lettered_and_nothing_is_lost(
    store: EndpointStore, moto: MotoServer
) -> None:
    """One batch full (its third record waits), another batch's record failing: the checkpoint
    stops before the earlier of the two, the failing record is retried up to `max_retries` times,
    then dead-lettered once and never delivered again; every other record is delivered."""
    names = [f"ep-{index}" for index in range(40)]
    full = [name for name in names if group_of(name, 2) == 0][:3]
    failing = next(name for name in names if group_of(name, 2) == 1)
    delivered: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        keys = [r["dynamodb"]["Keys"]["endpoint_name"]["S"] for r in event["Records"]]
        delivered.extend(keys)
        return {
            "batchItemFailures": [
                {"itemIdentifier": r["dynamodb"]["SequenceNumber"]}
                for r, key in zip(event["Records"], keys, strict=True)
                if key == failing
            ]
        }

    client, _ = counted_client(moto)
    arn = store.client.describe_table(TableName=store.table_name)["Table"]["LatestStreamArn"]
    queue = aws.client("sqs", endpoint_url=moto.url).create_queue(QueueName="gco-dead-letters")["QueueUrl"]
    destination = sqs_destination(aws.client("sqs", endpoint_url=moto.url), queue)
    function = "arn:aws:lambda:us-east-1:123456789012:function:gco-reconciler-stream"
    poller = StreamPoller(
        client, arn, handler, region=EAST, batch_size=2, parallelization=2, max_retries=3,
        on_failure=destination, function_arn=function,
    )  # fmt: skip
    for name in [*full, failing]:
        store.create(name, SPEC, [EAST])
    assert poller.drain() > 0
    assert Counter(delivered) == Counter({full[0]: 1, full[1]: 1, full[2]: 1, failing: 3})
    assert [r["dynamodb"]["Keys"]["endpoint_name"]["S"] for r in poller.dead_letters] == [failing]
    # the mapping's on-failure queue is told of it as Lambda tells it: the batch's place in the stream
    (message,) = aws.client("sqs", endpoint_url=moto.url).receive_message(QueueUrl=queue)["Messages"]
    document = json.loads(message["Body"])
    info = document["DDBStreamBatchInfo"]
    sequence = poller.dead_letters[0]["dynamodb"]["SequenceNumber"]
    assert (info["startSequenceNumber"], info["endSequenceNumber"], info["batchSize"]) == (
        sequence,
        sequence,
        1,
    )
    assert info["streamArn"] == arn and info["shardId"].startswith("shardId-")
    assert document["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert document["requestContext"]["functionArn"] == function
    assert document["requestContext"]["approximateInvokeCount"] == 3
    store.create("after", SPEC, [EAST])
    assert poller.drain() == 1 and delivered[-1] == "after"
    assert len(poller.dead_letters) == 1


def test_the_moto_server_reports_the_cpu_it_used(moto: MotoServer) -> None:
    """What the latency benchmark prints beside each row: the server's CPU grows with its work."""
    before = moto.cpu_seconds()
    assert before is not None and before > 0  # it imported moto at least
    client = aws.client("dynamodb", endpoint_url=moto.url)
    for _ in range(50):
        client.list_tables()
    after = moto.cpu_seconds()
    assert after is not None and after > before
    assert MotoServer().cpu_seconds() is None  # not started


class ClosedShardStreams:
    """A `dynamodbstreams` client whose one shard is closed after two records: its GetRecords
    answers no NextShardIterator, as DynamoDB Streams does at the end of a closed shard
    (API_streams_GetRecords: "If set to null, the shard has been closed and the requested iterator
    will not return any more data"). moto never closes a shard, so the end is modelled here; what
    it does not model: the child shards a split opens."""

    def __init__(self) -> None:
        self.meta = type("Meta", (), {"events": type("Events", (), {"register": lambda *a, **k: None})()})()
        self.reads = 0

    def describe_stream(self, **_: Any) -> dict[str, Any]:
        return {"StreamDescription": {"Shards": [{"ShardId": "shard-0"}]}}

    def get_shard_iterator(self, **_: Any) -> dict[str, Any]:
        return {"ShardIterator": "start"}

    def get_records(self, **_: Any) -> dict[str, Any]:
        self.reads += 1
        records = [
            {
                "eventName": "INSERT",
                "dynamodb": {"Keys": {"endpoint_name": {"S": name}}, "SequenceNumber": seq},
            }
            for name, seq in (("a", "1"), ("b", "2"))
        ]
        return {"Records": records if self.reads == 1 else []}


def test_a_closed_shard_read_to_its_end_is_not_read_again() -> None:
    delivered: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        delivered.extend(r["dynamodb"]["SequenceNumber"] for r in event["Records"])
        return {"batchItemFailures": []}

    client = ClosedShardStreams()
    poller = StreamPoller(client, "arn", handler, region=EAST, parallelization=2)
    assert poller.drain() == 2
    assert poller.poll_once() == 0
    assert sorted(delivered) == ["1", "2"] and client.reads == 1
    assert poller.checkpoints == {"shard-0": "2"}
