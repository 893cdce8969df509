"""The keys table: each bearer key's record (its SHA-256, never the key), in DynamoDB.

In AWS the table is a global table with a replica in every Region (the global stack), so each
Region's authorizer reads its own replica; locally it is a table on the moto server
(`create_keys_table`, as `gco inference init-table` makes the endpoint table). Partition key
`key_id`; items hold the `ApiKey` fields as plain strings and a list of strings.

Writes are conditional: a new key is put only where its id is not taken (`attribute_not_exists`),
and a revocation is an update of an existing item that sets `revoked_at` once (`if_not_exists`), so
revoking twice keeps the first time. Reads of one key are strongly consistent in the Region read:
a revocation is refused at once there; another Region's replica sees it when the global table
replicates it ("typically within a second", docs.aws.amazon.com/amazondynamodb/latest/developerguide/
V2globaltables_HowItWorks.html). Every botocore error is converted here into a `KeyStoreError`.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from gco import aws
from gco.endpoints.tokens import format_timestamp
from gco.global_access.errors import KeyExistsError, KeyNotFoundError, KeyRecordError, KeyStoreError
from gco.global_access.keys import ApiKey, check_key_id, new_key

KEYS_TABLE_ENV = "GCO_KEYS_TABLE_NAME"
DEFAULT_KEYS_TABLE = "gco-api-keys"
KEY_ATTRIBUTE = "key_id"
MAX_LISTED = 10_000  # a Scan's pages are read up to this many keys: `gco keys list` stays bounded
CONDITION_FAILED = "ConditionalCheckFailedException"


class KeyStore(Protocol):
    """The calls the CLI, the authorizer and the local global address make on the keys."""

    def put(self, record: ApiKey) -> None: ...

    def get(self, key_id: str) -> ApiKey | None: ...

    def revoke(self, key_id: str, now: datetime) -> ApiKey: ...

    def list(self) -> list[ApiKey]: ...


def to_item(record: ApiKey) -> dict[str, Any]:
    """The record as a DynamoDB item (attribute values); an unset field is left out."""
    item: dict[str, Any] = {}
    for field, value in record.to_dict(exclude_none=True).items():
        if isinstance(value, list):
            item[field] = {"L": [{"S": entry} for entry in value]}
        else:
            item[field] = {"S": value}
    return item


def from_item(item: dict[str, Any]) -> ApiKey:
    """The record an item holds.

    Raises:
        KeyStoreError: the item is not a key record (naming its id and the first bad field).
    """
    plain: dict[str, Any] = {}
    for field, value in item.items():
        if "L" in value:
            plain[field] = [entry.get("S") for entry in value["L"]]
        elif "S" in value:
            plain[field] = value["S"]
        elif value.get("NULL"):
            plain[field] = None
    try:
        return ApiKey.parse(plain)
    except KeyRecordError as error:
        raise KeyStoreError(
            f"key item {str(plain.get(KEY_ATTRIBUTE))[:40]!r} is malformed: {error.field}: {error.message}"
        ) from None


class DynamoKeyStore:
    """`KeyStore` over a DynamoDB table (a botocore client); the real adapter.

    Stand-in: the moto server's DynamoDB, reached over HTTP (tests/functional/global_access/).
    """

    def __init__(self, client: Any, table_name: str = DEFAULT_KEYS_TABLE) -> None:
        self.client = client
        self.table = table_name

    @classmethod
    def connect(
        cls, *, endpoint_url: str | None = None, table_name: str | None = None, region: str | None = None
    ) -> DynamoKeyStore:
        """A store on the keys table (env `GCO_KEYS_TABLE_NAME`) in `region` (default: the home Region)."""
        name = table_name or os.environ.get(KEYS_TABLE_ENV) or DEFAULT_KEYS_TABLE
        return cls(aws.client("dynamodb", region=region, endpoint_url=endpoint_url), name)

    def create(
        self, name: str, endpoints: list[str], *, now: datetime, created_by: str | None = None
    ) -> tuple[str, ApiKey]:
        """Make a key (`keys.new_key`) and store its record; returns (the key, shown once; its record).

        Raises:
            GcoInputError: the name or an endpoint name is invalid (nothing written).
            KeyExistsError: its random id is taken (nothing written; try again).
            KeyStoreError: the table cannot be written.
        """
        plaintext, record = new_key(name, endpoints, now=now, created_by=created_by)
        self.put(record)
        return plaintext, record

    def _call(self, operation: str, **arguments: Any) -> dict[str, Any]:
        try:
            answer: dict[str, Any] = getattr(self.client, operation)(TableName=self.table, **arguments)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code == CONDITION_FAILED:
                raise
            raise KeyStoreError(f"{operation} on {self.table} failed: {code or error}") from error
        except BotoCoreError as error:
            raise KeyStoreError(f"{operation} on {self.table} failed: {error}") from error
        return answer

    def put(self, record: ApiKey) -> None:
        """Store a new key's record where its id is not taken.

        Raises:
            KeyExistsError: a key with this id is stored (nothing was written).
            KeyStoreError: the table cannot be written.
        """
        try:
            self._call(
                "put_item",
                Item=to_item(record),
                ConditionExpression="attribute_not_exists(#id)",
                ExpressionAttributeNames={"#id": KEY_ATTRIBUTE},
            )
        except ClientError:
            raise KeyExistsError(f"a key with id {record.key_id} exists") from None

    def get(self, key_id: str) -> ApiKey | None:
        """The record of `key_id` (a strongly consistent read), or None.

        Raises:
            KeyStoreError: the table cannot be read, or the item is malformed.
        """
        answer = self._call("get_item", Key={KEY_ATTRIBUTE: {"S": key_id}}, ConsistentRead=True)
        item = answer.get("Item")
        return from_item(item) if item else None

    def revoke(self, key_id: str, now: datetime) -> ApiKey:
        """Mark `key_id` revoked at `now` (a key revoked before keeps its first time).

        Raises:
            GcoInputError: `key_id` is not a key id.
            KeyNotFoundError: no key has this id.
            KeyStoreError: the table cannot be written.
        """
        check_key_id(key_id, "KEY_ID")
        try:
            answer = self._call(
                "update_item",
                Key={KEY_ATTRIBUTE: {"S": key_id}},
                UpdateExpression="SET #revoked = if_not_exists(#revoked, :now)",
                ConditionExpression="attribute_exists(#id)",
                ExpressionAttributeNames={"#id": KEY_ATTRIBUTE, "#revoked": "revoked_at"},
                ExpressionAttributeValues={":now": {"S": format_timestamp(now)}},
                ReturnValues="ALL_NEW",
            )
        except ClientError:
            raise KeyNotFoundError(f"no key has id {key_id}") from None
        return from_item(answer["Attributes"])

    def list(self) -> list[ApiKey]:
        """Every key's record, newest first (at most `MAX_LISTED`).

        Raises:
            KeyStoreError: the table cannot be read, or an item is malformed.
        """
        found: list[ApiKey] = []
        arguments: dict[str, Any] = {}
        while len(found) < MAX_LISTED:
            page = self._call("scan", **arguments)
            found += [from_item(item) for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            arguments = {"ExclusiveStartKey": page["LastEvaluatedKey"]}
        return sorted(found[:MAX_LISTED], key=lambda record: record.created_at, reverse=True)


def create_keys_table(client: Any, table_name: str = DEFAULT_KEYS_TABLE) -> bool:
    """Create the keys table where it does not exist (local endpoints; in AWS the stack owns it).

    Returns:
        True when it was created, False when a table of that name with the `key_id` key was there.

    Raises:
        KeyStoreError: DescribeTable or CreateTable failed, or the table there has another key.
    """
    try:
        table = client.describe_table(TableName=table_name)["Table"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise KeyStoreError(f"DescribeTable {table_name} failed: {error}") from error
    except BotoCoreError as error:
        raise KeyStoreError(f"DescribeTable {table_name} failed: {error}") from error
    else:
        schema = [(key["AttributeName"], key["KeyType"]) for key in table.get("KeySchema", [])]
        if schema != [(KEY_ATTRIBUTE, "HASH")]:
            raise KeyStoreError(f"table {table_name} key schema is {schema}, expected {KEY_ATTRIBUTE} HASH")
        return False
    try:
        client.create_table(
            TableName=table_name,
            AttributeDefinitions=[{"AttributeName": KEY_ATTRIBUTE, "AttributeType": "S"}],
            KeySchema=[{"AttributeName": KEY_ATTRIBUTE, "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
            SSESpecification={"Enabled": True},
        )
        client.get_waiter("table_exists").wait(
            TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ResourceInUseException":
            return False  # a concurrent creator won
        raise KeyStoreError(f"CreateTable {table_name} failed: {error}") from error
    except BotoCoreError as error:
        raise KeyStoreError(f"CreateTable {table_name} failed: {error}") from error
    return True
