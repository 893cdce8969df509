"""The keys table on the moto server over HTTP: conditional put, consistent get, revoke once, list."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gco.endpoints.tokens import format_timestamp
from gco.errors import GcoInputError
from gco.global_access import keys
from gco.global_access.errors import KeyExistsError, KeyNotFoundError, KeyStoreError
from gco.global_access.key_store import KEYS_TABLE_ENV, DynamoKeyStore, create_keys_table, to_item
from gco.local.moto.motoserver import MotoServer

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture
def key_store(dynamodb: Any) -> DynamoKeyStore:
    assert create_keys_table(dynamodb, "test-keys") is True
    assert create_keys_table(dynamodb, "test-keys") is False
    return DynamoKeyStore(dynamodb, "test-keys")


def test_a_key_round_trips_without_its_plaintext(key_store: DynamoKeyStore, dynamodb: Any) -> None:
    plaintext, record = keys.new_key("ci", ["smol"], now=NOW, created_by="alice")
    key_store.put(record)
    assert key_store.get(record.key_id) == record
    raw = str(dynamodb.scan(TableName="test-keys")["Items"])
    # The whole secret (43 base64url characters, which may hold '-': splitting the key at its last
    # '-' once gave a one-letter "secret" found in the item's other text).
    secret = keys.KEY.fullmatch(plaintext)
    assert secret is not None
    assert plaintext not in raw and secret["secret"] not in raw
    assert key_store.get("0" * 12) is None


def test_a_taken_id_is_refused(key_store: DynamoKeyStore) -> None:
    _, record = keys.new_key("ci", ["*"], now=NOW)
    key_store.put(record)
    with pytest.raises(KeyExistsError):
        key_store.put(dataclasses.replace(record, name="other"))
    assert key_store.get(record.key_id) == record


def test_revoke_sets_the_time_once(key_store: DynamoKeyStore) -> None:
    plaintext, record = keys.new_key("ci", ["*"], now=NOW)
    key_store.put(record)
    revoked = key_store.revoke(record.key_id, NOW + timedelta(seconds=5))
    assert revoked.revoked_at == format_timestamp(NOW + timedelta(seconds=5))
    again = key_store.revoke(record.key_id, NOW + timedelta(seconds=9))
    assert again.revoked_at == revoked.revoked_at
    stored = key_store.get(record.key_id)
    assert stored is not None
    assert keys.verify(plaintext, stored, "smol", NOW + timedelta(seconds=6)).refusal == "revoked"


def test_revoke_of_an_unknown_or_malformed_id(key_store: DynamoKeyStore) -> None:
    with pytest.raises(KeyNotFoundError):
        key_store.revoke("0123456789ab", NOW)
    with pytest.raises(GcoInputError):
        key_store.revoke("not-an-id", NOW)
    assert key_store.list() == []


def test_list_is_newest_first_over_pages(key_store: DynamoKeyStore) -> None:
    made = [keys.new_key(f"k{i}", ["*"], now=NOW + timedelta(seconds=i))[1] for i in range(5)]
    for record in made:
        key_store.put(record)
    assert [record.name for record in key_store.list()] == ["k4", "k3", "k2", "k1", "k0"]


def test_a_missing_table_is_a_store_error(dynamodb: Any) -> None:
    with pytest.raises(KeyStoreError) as caught:
        DynamoKeyStore(dynamodb, "no-such-table").get("0123456789ab")
    assert "ResourceNotFoundException" in str(caught.value)


def test_a_malformed_item_is_named(key_store: DynamoKeyStore, dynamodb: Any) -> None:
    dynamodb.put_item(TableName="test-keys", Item={"key_id": {"S": "0123456789ab"}, "name": {"S": "x"}})
    with pytest.raises(KeyStoreError) as caught:
        key_store.get("0123456789ab")
    assert "'0123456789ab' is malformed" in str(caught.value)


def test_an_item_scoped_to_a_malformed_endpoint_name_is_a_store_error(
    key_store: DynamoKeyStore, dynamodb: Any
) -> None:
    """Not the endpoint name's own `InvalidSpecError` (which the former pydantic model let through
    its validator): the store's error, naming the item and the list entry."""
    _, record = keys.new_key("k", ["smol"], now=NOW)
    item = {**to_item(record), "endpoints": {"L": [{"S": "smol"}, {"S": "Bad_Name"}]}}
    dynamodb.put_item(TableName="test-keys", Item=item)
    with pytest.raises(KeyStoreError) as caught:
        key_store.get(record.key_id)
    assert f"{record.key_id!r} is malformed: endpoints[1]:" in str(caught.value)


def test_a_table_with_another_key_is_refused(dynamodb: Any) -> None:
    dynamodb.create_table(
        TableName="wrong",
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    with pytest.raises(KeyStoreError):
        create_keys_table(dynamodb, "wrong")


def test_create_makes_and_stores_a_key(key_store: DynamoKeyStore) -> None:
    plaintext, record = key_store.create("made", ["smol"], now=NOW, created_by="bob")
    assert key_store.get(record.key_id) == record
    assert keys.verify(plaintext, record, "smol", NOW).allowed
    with pytest.raises(GcoInputError):
        key_store.create("made", ["Not_A_Name"], now=NOW)
    assert len(key_store.list()) == 1


def test_connect_reads_the_table_name_from_the_environment(
    moto: MotoServer, monkeypatch: pytest.MonkeyPatch, dynamodb: Any
) -> None:
    monkeypatch.setenv(KEYS_TABLE_ENV, "env-keys")
    store = DynamoKeyStore.connect(endpoint_url=moto.url)
    assert store.table == "env-keys"
    create_keys_table(store.client, store.table)
    assert store.list() == []
