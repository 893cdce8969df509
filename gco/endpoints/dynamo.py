"""The DynamoDB edge of the store: one record per key, conditional writes, errors converted.

A failed condition becomes `ConditionLost` carrying the item DynamoDB returned with the failure
(ReturnValuesOnConditionCheckFailure), so the store can say why without another read.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from gco.endpoints.codec import from_item, to_item
from gco.endpoints.errors import StoreUnavailableError
from gco.endpoints.expressions import Expression
from gco.endpoints.record import EndpointRecord, parse_record

CONDITION_FAILED = "ConditionalCheckFailedException"


class ConditionLost(Exception):  # noqa: N818 - an internal signal, never raised past the store
    """A conditional write lost; `old` is the record as it stood (None when there was none)."""

    def __init__(self, old: EndpointRecord | None) -> None:
        self.old = old


class RecordTable:
    """Reads and conditional writes of endpoint records in one table, by endpoint name."""

    def __init__(self, client: Any, table_name: str) -> None:
        self.client = client
        self.table_name = table_name

    def get(self, name: str, consistent_read: bool = True) -> EndpointRecord | None:
        response = self._call("get_item", Key=self._key(name), ConsistentRead=consistent_read)
        item = response.get("Item")
        return parse_record(from_item(item)) if item else None

    def _key(self, name: str) -> dict[str, Any]:
        return {"endpoint_name": {"S": name}}

    def _update(self, name: str, expression: Expression) -> EndpointRecord:
        response = self._write(
            "update_item", Key=self._key(name), ReturnValues="ALL_NEW", **expression.request()
        )
        return parse_record(from_item(response["Attributes"]))

    def _put(self, fields: dict[str, Any], expression: Expression) -> None:
        self._write("put_item", Item=to_item(fields), **expression.request())

    def _write(self, operation: str, **arguments: Any) -> dict[str, Any]:
        """A conditional put/update/delete; raises `ConditionLost` when its condition fails."""
        try:
            return self._call(operation, ReturnValuesOnConditionCheckFailure="ALL_OLD", **arguments)
        except ClientError as error:
            item: Any = error.response.get("Item")
            raise ConditionLost(parse_record(from_item(item)) if item else None) from None

    def _call(self, operation: str, **arguments: Any) -> dict[str, Any]:
        """One DynamoDB call (retried by the client's adaptive mode); other failures converted."""
        try:
            response: dict[str, Any] = getattr(self.client, operation)(TableName=self.table_name, **arguments)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == CONDITION_FAILED:
                raise
            raise StoreUnavailableError(
                f"DynamoDB {operation} on {self.table_name} failed: {error}"
            ) from error
        except BotoCoreError as error:
            raise StoreUnavailableError(
                f"DynamoDB {operation} on {self.table_name} failed: {error}"
            ) from error
        return response
