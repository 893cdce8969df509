"""The DynamoDB edge of the store: one record per key, conditional writes, errors converted.

A failed condition becomes `ConditionLost` carrying the item DynamoDB returned with the failure
(ReturnValuesOnConditionCheckFailure), so the store can say why without another read.

The items of a successful answer reach the codec as the JSON protocol wrote them: botocore's parser
walks every attribute value of an item against the service model only to rebuild the same
AttributeValue dicts (binary values aside, which stay base64 text and which the codec decodes), and
that walk was the largest part of a status write's client CPU (UpdateItem answers with the whole
record, ReturnValues ALL_NEW). A `before-parse` hook on the table's client takes each answer's
items out of the body before botocore parses the rest, as Lambda's stream poller hands records on.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from gco.endpoints.codec import from_item, to_item
from gco.endpoints.errors import StoreUnavailableError
from gco.endpoints.expressions import Expression
from gco.endpoints.record import EndpointRecord, parse_record

CONDITION_FAILED = "ConditionalCheckFailedException"
# The store's operations whose answers carry items, and the member that holds them.
ITEM_MEMBERS = {
    "GetItem": "Item",
    "PutItem": "Attributes",
    "UpdateItem": "Attributes",
    "DeleteItem": "Attributes",
    "Scan": "Items",
    "Query": "Items",
}


def keep_wire_items(
    response_dict: dict[str, Any], customized_response_dict: dict[str, Any], *, member: str, **_: Any
) -> None:
    """botocore's `before-parse` hook: a successful answer's `member` taken out of the body unparsed
    (in the parsed response as the protocol wrote it); what is left, and any error, parsed as usual."""
    if response_dict.get("status_code", 500) >= 300 or not response_dict.get("body"):
        return
    try:
        body = json.loads(response_dict["body"])
    except ValueError:  # not JSON: botocore's parser raises its own error for it, converted by `_call`
        return
    if isinstance(body, dict) and member in body:
        customized_response_dict[member] = body.pop(member)
        response_dict["body"] = json.dumps(body).encode()


def keep_items_unparsed(client: Any) -> None:
    """Register `keep_wire_items` on `client` for each of `ITEM_MEMBERS` (once per client)."""
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is None:  # not a botocore client (a test's stand-in)
        return
    for operation, member in ITEM_MEMBERS.items():
        hook = functools.partial(keep_wire_items, member=member)
        events.register(f"before-parse.dynamodb.{operation}", hook, unique_id=f"gco-wire-items-{operation}")


class ConditionLost(Exception):  # noqa: N818 - an internal signal, never raised past the store
    """A conditional write lost; `old` is the record as it stood (None when there was none)."""

    def __init__(self, old: EndpointRecord | None) -> None:
        self.old = old


class RecordTable:
    """Reads and conditional writes of endpoint records in one table, by endpoint name."""

    def __init__(self, client: Any, table_name: str) -> None:
        self.client = client
        self.table_name = table_name
        keep_items_unparsed(client)

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
