"""Creating the endpoint table where nothing else owns it (a local endpoint; in AWS, CDK does).

The table has the endpoint name as its partition key and a NEW_AND_OLD_IMAGES stream.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from gco.endpoints.errors import StoreUnavailableError, TableMismatchError


def describe(client: Any, table_name: str) -> dict[str, Any] | None:
    """The table's description, or None where it does not exist.

    Raises:
        StoreUnavailableError: DescribeTable failed for another reason.
    """
    try:
        table: dict[str, Any] = client.describe_table(TableName=table_name)["Table"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return None
        raise StoreUnavailableError(f"DescribeTable {table_name} failed: {error}") from error
    except BotoCoreError as error:
        raise StoreUnavailableError(f"DescribeTable {table_name} failed: {error}") from error
    return table


def check_shape(table: dict[str, Any]) -> None:
    """Raise `TableMismatchError` unless the key is endpoint_name and the stream has both images.

    Raises:
        TableMismatchError: the key is not `endpoint_name`, or the stream lacks NEW_AND_OLD_IMAGES.
    """
    keys = [(key["AttributeName"], key["KeyType"]) for key in table.get("KeySchema", [])]
    if keys != [("endpoint_name", "HASH")]:
        raise TableMismatchError(
            f"table {table['TableName']} key schema is {keys}, expected endpoint_name HASH"
        )
    stream = table.get("StreamSpecification") or {}
    if not stream.get("StreamEnabled") or stream.get("StreamViewType") != "NEW_AND_OLD_IMAGES":
        raise TableMismatchError(f"table {table['TableName']} has no NEW_AND_OLD_IMAGES stream")


def init_table(client: Any, table_name: str) -> tuple[bool, dict[str, Any]]:
    """Create the table with its stream if it does not exist; wait until it is active.

    Returns:
        (created, description): created is False when the table was already there.

    Raises:
        StoreUnavailableError: DescribeTable or CreateTable failed.
        TableMismatchError: a table of that name exists with another shape.
    """
    existing = describe(client, table_name)
    if existing is not None:
        check_shape(existing)
        return False, existing
    try:
        client.create_table(
            TableName=table_name,
            AttributeDefinitions=[{"AttributeName": "endpoint_name", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "endpoint_name", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
            SSESpecification={"Enabled": True},
            DeletionProtectionEnabled=True,
        )
        client.get_waiter("table_exists").wait(
            TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ResourceInUseException":
            return init_table(client, table_name)  # a concurrent creator won: use its table
        raise StoreUnavailableError(f"CreateTable {table_name} failed: {error}") from error
    except BotoCoreError as error:
        raise StoreUnavailableError(f"CreateTable {table_name} failed: {error}") from error
    created = describe(client, table_name)
    assert created is not None
    return True, created
