"""The authorizer's DynamoDB reads, against the moto server over HTTP: one GetItem per table."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gco.endpoints import EndpointStore, MalformedRecordError, StoreUnavailableError
from gco.global_access.authorizer_tables import DynamoTables
from gco.global_access.errors import KeyStoreError
from gco.global_access.key_store import to_item
from gco.global_access.keys import new_key

KEYS = "gco-test-api-keys"
NOW = datetime(2026, 1, 2, tzinfo=UTC)


@pytest.fixture
def keys_table(dynamodb: Any) -> str:
    dynamodb.create_table(
        TableName=KEYS,
        KeySchema=[{"AttributeName": "key_id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "key_id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return KEYS


def test_reads_a_key_and_an_endpoint(dynamodb: Any, store: EndpointStore, keys_table: str) -> None:
    _, key = new_key("ci", ["smol"], now=NOW)
    dynamodb.put_item(TableName=keys_table, Item=to_item(key))
    store.create("smol", {"image": "vllm/vllm-openai:v0.6.3"}, ["us-east-1"])
    tables = DynamoTables(
        region="us-east-1", keys_table=keys_table, endpoints_table=store.table_name, client=dynamodb
    )
    assert tables.api_key(key.key_id) == key
    assert tables.api_key("0" * 12) is None
    record = tables.endpoint("smol")
    assert record is not None and record.target_regions == ("us-east-1",)
    assert tables.endpoint("absent") is None


def test_read_failures_and_malformed_items_are_named(
    dynamodb: Any, store: EndpointStore, keys_table: str
) -> None:
    dynamodb.put_item(TableName=keys_table, Item={"key_id": {"S": "a" * 12}, "name": {"S": "x"}})
    dynamodb.put_item(TableName=store.table_name, Item={"endpoint_name": {"S": "bad"}, "spec": {"S": "x"}})
    tables = DynamoTables(
        region="us-east-1", keys_table=keys_table, endpoints_table=store.table_name, client=dynamodb
    )
    with pytest.raises(KeyStoreError, match="is malformed"):
        tables.api_key("a" * 12)
    with pytest.raises(MalformedRecordError):
        tables.endpoint("bad")
    missing = DynamoTables(region="us-east-1", keys_table="absent", endpoints_table="absent", client=dynamodb)
    with pytest.raises(KeyStoreError, match="get_item on absent failed: ResourceNotFoundException"):
        missing.api_key("a" * 12)
    with pytest.raises(StoreUnavailableError, match="cannot read absent"):
        missing.endpoint("smol")
