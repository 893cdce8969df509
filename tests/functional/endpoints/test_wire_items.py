"""The table's answers reach the codec as the JSON protocol wrote their items (not walked by botocore's
parser), over HTTP to the moto server: the same values, binaries as base64 text, errors parsed as usual."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from botocore.exceptions import ClientError

from gco.endpoints.codec import from_item
from gco.endpoints.dynamo import RecordTable, keep_items_unparsed, keep_wire_items
from gco.endpoints.store import EndpointStore
from tests.unit.reconcile.records import EAST, IMAGE

BLOB = b"\x00\x01\xfe"
WIRE_BLOB = base64.b64encode(BLOB).decode()


def test_item_answers_are_left_as_the_protocol_wrote_them(store: EndpointStore, dynamodb: Any) -> None:
    table = store.table_name
    key = {"endpoint_name": {"S": "raw"}}
    item = {
        **key,
        "blob": {"B": BLOB},
        "blobs": {"BS": [BLOB]},
        "n": {"N": "1.5"},
        "m": {"M": {"s": {"S": "x"}}},
    }
    dynamodb.put_item(TableName=table, Item=item)
    got = dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    assert got["blob"] == {"B": WIRE_BLOB} and got["blobs"] == {"BS": [WIRE_BLOB]}  # not parsed to bytes
    assert got["n"] == {"N": "1.5"} and got["m"] == {"M": {"s": {"S": "x"}}}
    assert from_item(got) == {
        "endpoint_name": "raw",
        "blob": BLOB,
        "blobs": [BLOB],
        "n": 1.5,
        "m": {"s": "x"},
    }
    updated = dynamodb.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET n = :n",
        ExpressionAttributeValues={":n": {"N": "2"}},
        ReturnValues="ALL_NEW",
    )["Attributes"]
    assert updated["blob"] == {"B": WIRE_BLOB} and updated["n"] == {"N": "2"}
    scanned = dynamodb.scan(TableName=table, ConsistentRead=True)
    assert scanned["Items"][0]["blob"] == {"B": WIRE_BLOB} and scanned["Count"] == 1  # the rest parsed
    with pytest.raises(ClientError) as lost:
        dynamodb.put_item(
            TableName=table,
            Item=key,
            ConditionExpression="attribute_not_exists(endpoint_name)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    assert lost.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    returned: Any = lost.value.response
    assert from_item(returned["Item"])["blob"] == BLOB  # an error's item: botocore's parse


def test_the_store_reads_and_writes_records_through_the_unparsed_answers(store: EndpointStore) -> None:
    created = store.create("wire", {"image": IMAGE, "model_id": "m"}, [EAST])
    assert store.get("wire") == created
    assert store.list() == [created]
    keep_items_unparsed(store.client)  # registering again replaces the hooks, never stacks them
    stopped = store.update_desired_state("wire", "stopped", expected_lifecycle_id=created.lifecycle_id)
    assert stopped is not None and stopped.desired_state == "stopped"
    assert RecordTable(store.client, store.table_name).get("wire") == stopped


def test_a_client_that_is_not_botocore_is_left_alone() -> None:
    keep_items_unparsed(object())  # a test's stand-in: nothing to register on


def test_an_answer_that_is_not_json_is_left_to_botocore() -> None:
    answer = {"status_code": 200, "body": b"<html>proxy error</html>"}
    customized: dict[str, Any] = {}
    keep_wire_items(answer, customized, member="Item")
    assert customized == {} and answer["body"] == b"<html>proxy error</html>"
    keep_wire_items({"status_code": 400, "body": b'{"Item": {}}'}, customized, member="Item")
    assert customized == {}  # an error's body is botocore's to parse
