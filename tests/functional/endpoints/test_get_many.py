"""A batch's records in one read: `RecordTable.get_many` (BatchGetItem) answers what `get` answers, over
HTTP to the moto server, and leaves out what it cannot answer for, so that the caller reads it alone."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.stub import Stubber

from gco import aws
from gco.endpoints.codec import to_item
from gco.endpoints.dynamo import BATCH_GET_ATTEMPTS, BATCH_GET_BACKOFF_S, BATCH_GET_KEYS, RecordTable
from gco.endpoints.errors import MalformedRecordError
from gco.endpoints.store import EndpointStore

SPEC = {"image": "vllm/vllm-openai:v0.6.3", "model_id": "m", "replicas": 2}


def batch_calls(client: Any) -> list[int]:
    """The number of keys of each BatchGetItem `client` sends from now on."""
    sent: list[int] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        sent.append(sum(len(table["Keys"]) for table in params["RequestItems"].values()))

    client.meta.events.register("provide-client-params.dynamodb.BatchGetItem", count)
    return sent


def test_records_read_together_are_those_read_alone(store: EndpointStore) -> None:
    names = [f"ep-{index:03d}" for index in range(BATCH_GET_KEYS + 20)]
    for name in names:
        store.create(name, SPEC, ["us-east-1"])
    sent = batch_calls(store.client)
    found = store.get_many([*names, "absent", names[0]])
    assert sent == [BATCH_GET_KEYS, 21]  # 100 keys a call; a name asked twice is read once
    assert found["absent"] is None
    assert set(found) == {*names, "absent"}
    for name in (names[0], names[-1]):
        assert found[name] == store.get(name)


def test_an_unparseable_item_is_left_out_for_the_caller_to_read_alone(
    store: EndpointStore, dynamodb: Any
) -> None:
    store.create("good", SPEC, ["us-east-1"])
    dynamodb.put_item(
        TableName=store.table_name, Item=to_item({"endpoint_name": "bad", "spec": {"port": "x"}})
    )
    found = store.get_many(["good", "bad"])
    assert set(found) == {"good"} and found["good"] == store.get("good")
    with pytest.raises(MalformedRecordError):
        store.get("bad")


def stubbed_table() -> tuple[RecordTable, Stubber, list[float]]:
    client = aws.client("dynamodb", region="us-east-1", endpoint_url="http://127.0.0.1:9")
    slept: list[float] = []
    table = RecordTable(client, "records", sleep=slept.append)
    return table, Stubber(client), slept


def key(name: str) -> dict[str, Any]:
    return {"endpoint_name": {"S": name}}


def request(*names: str) -> dict[str, Any]:
    return {"RequestItems": {"records": {"Keys": [key(name) for name in names], "ConsistentRead": True}}}


def test_unprocessed_keys_are_retried_with_backoff_then_left_out() -> None:
    """DynamoDB may leave keys unprocessed (its 16 MB or the table's throughput); the API reference
    asks for a retry of those keys with exponential backoff."""
    table, stub, slept = stubbed_table()
    stub.add_response(
        "batch_get_item",
        {"Responses": {"records": []}, "UnprocessedKeys": {"records": {"Keys": [key("b")]}}},
        request("a", "b"),
    )
    for _ in range(BATCH_GET_ATTEMPTS - 1):
        stub.add_response(
            "batch_get_item",
            {"Responses": {"records": []}, "UnprocessedKeys": {"records": {"Keys": [key("b")]}}},
            request("b"),
        )
    with stub:
        found = table.get_many(["a", "b"])
    stub.assert_no_pending_responses()
    assert found == {"a": None}  # "a" has no item; "b" was never answered for: read it alone
    assert slept == [BATCH_GET_BACKOFF_S * 2**attempt for attempt in range(BATCH_GET_ATTEMPTS - 1)]


def test_a_key_processed_on_retry_is_answered() -> None:
    table, stub, slept = stubbed_table()
    stub.add_response(
        "batch_get_item",
        {"Responses": {"records": []}, "UnprocessedKeys": {"records": {"Keys": [key("b")]}}},
        request("a", "b"),
    )
    stub.add_response("batch_get_item", {"Responses": {"records": []}, "UnprocessedKeys": {}}, request("b"))
    with stub:
        assert table.get_many(["a", "b"]) == {"a": None, "b": None}
    assert slept == [BATCH_GET_BACKOFF_S]
