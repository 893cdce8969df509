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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from gco.endpoints.codec import from_item, to_item
from gco.endpoints.errors import MalformedRecordError, StoreUnavailableError
from gco.endpoints.expressions import Expression
from gco.endpoints.record import EndpointRecord, parse_record

CONDITION_FAILED = "ConditionalCheckFailedException"
# The store's operations whose answers carry items, and the member that holds them.
ITEM_MEMBERS = {
    "GetItem": "Item",
    "BatchGetItem": "Responses",
    "PutItem": "Attributes",
    "UpdateItem": "Attributes",
    "DeleteItem": "Attributes",
    "Scan": "Items",
    "Query": "Items",
}
# BatchGetItem reads at most 100 keys a call, and may leave some unprocessed (answering within its 16 MB
# or the table's throughput): "If DynamoDB returns any unprocessed items, you should retry the batch
# operation on those items [...] we strongly recommend that you use an exponential backoff algorithm"
# (DynamoDB API Reference, BatchGetItem). `get_many` retries them this many times, then leaves them out.
BATCH_GET_KEYS = 100
BATCH_GET_ATTEMPTS = 3
BATCH_GET_BACKOFF_S = 0.05
# A scan page holds up to 1 MB, so this bounds a listing at about 100 GB of records: never reached,
# but every loop is bounded.
MAX_SCAN_PAGES = 100_000


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


@dataclass(frozen=True)
class Listing:
    """A scan's outcome: the readable records, newest first, and one error per unreadable item."""

    records: list[EndpointRecord]
    unreadable: list[MalformedRecordError]


class RecordTable:
    """Reads and conditional writes of endpoint records in one table, by endpoint name.

    A write takes its condition as an `Expression` and raises `ConditionLost` (with the record as
    it stood) when the condition fails; the caller decides what a lost condition means.

    Raises:
        StoreUnavailableError: from every method: a DynamoDB call failed (after the client's
            retries) other than by a lost condition.
    """

    def __init__(self, client: Any, table_name: str, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.client = client
        self.table_name = table_name
        self._sleep = sleep
        keep_items_unparsed(client)

    def get(self, name: str, consistent_read: bool = True) -> EndpointRecord | None:
        """The record of `name`, or None.

        Raises:
            MalformedRecordError: the stored item does not parse as a record.
        """
        response = self._call("get_item", Key=self._key(name), ConsistentRead=consistent_read)
        item = response.get("Item")
        return parse_record(from_item(item)) if item else None

    def get_many(
        self, names: Sequence[str], consistent_read: bool = True
    ) -> dict[str, EndpointRecord | None]:
        """The records of `names` read with BatchGetItem (100 keys a call): None for a name with no
        item. A name is left out when its key stayed unprocessed after `BATCH_GET_ATTEMPTS` calls,
        or its item does not parse, so that the caller reads it alone (`get`, which raises for it).
        """
        found: dict[str, EndpointRecord | None] = {}
        unique = list(dict.fromkeys(names))
        for start in range(0, len(unique), BATCH_GET_KEYS):
            found.update(self._get_batch(unique[start : start + BATCH_GET_KEYS], consistent_read))
        return found

    def _get_batch(self, names: list[str], consistent_read: bool) -> dict[str, EndpointRecord | None]:
        """One chunk of `get_many` (at most `BATCH_GET_KEYS` names)."""
        found: dict[str, EndpointRecord | None] = {}
        answered: set[str] = set()  # names whose item came back, parsed or not
        keys = [self._key(name) for name in names]
        for attempt in range(BATCH_GET_ATTEMPTS):
            if attempt:
                self._sleep(BATCH_GET_BACKOFF_S * 2 ** (attempt - 1))
            request = {self.table_name: {"Keys": keys, "ConsistentRead": consistent_read}}
            answer = self._call_client("batch_get_item", RequestItems=request)
            for item in (answer.get("Responses") or {}).get(self.table_name, []):
                answered.add(str((item.get("endpoint_name") or {}).get("S")))
                try:
                    record = parse_record(from_item(item))
                except (MalformedRecordError, ValueError):
                    continue  # left out: the caller reads it alone, and its `get` raises
                found[record.endpoint_name] = record
            keys = ((answer.get("UnprocessedKeys") or {}).get(self.table_name) or {}).get("Keys") or []
            if not keys:
                break
        unprocessed = {key["endpoint_name"]["S"] for key in keys}
        for name in names:
            if name not in answered and name not in unprocessed:
                found[name] = None  # processed, and no item under the key
        return found

    def scan(self, where: Expression, *, consistent_read: bool) -> Listing:
        """Every item (all pages) that `where` keeps (a filter: no condition), newest first; an item
        that does not parse is in `unreadable`, never hiding the others."""
        arguments: dict[str, Any] = {"ConsistentRead": consistent_read}
        request = where.request()
        if "ConditionExpression" in request:
            arguments["FilterExpression"] = request.pop("ConditionExpression")
            arguments.update(request)
        records: list[EndpointRecord] = []
        unreadable: list[MalformedRecordError] = []
        for _ in range(MAX_SCAN_PAGES):
            page = self._call("scan", **arguments)
            for item in page.get("Items", []):
                try:
                    records.append(parse_record(from_item(item)))
                except MalformedRecordError as error:
                    unreadable.append(error)
            if "LastEvaluatedKey" not in page:
                break
            arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        records.sort(key=lambda record: (record.created_at or "", record.endpoint_name), reverse=True)
        return Listing(records, unreadable)

    def put(self, fields: dict[str, Any], condition: Expression) -> None:
        """Write a whole new item under `condition`; `ConditionLost` when it fails."""
        self._write("put_item", Item=to_item(fields), **condition.request())

    def update(self, name: str, expression: Expression) -> EndpointRecord:
        """Apply `expression` (its SETs under its condition); the record as written, or `ConditionLost`.

        Raises:
            MalformedRecordError: the written item does not parse as a record.
        """
        response = self._write(
            "update_item", Key=self._key(name), ReturnValues="ALL_NEW", **expression.request()
        )
        return parse_record(from_item(response["Attributes"]))

    def delete(self, name: str, condition: Expression) -> None:
        """Remove the record of `name` under `condition`; `ConditionLost` when it fails."""
        self._write("delete_item", Key=self._key(name), **condition.request())

    def _key(self, name: str) -> dict[str, Any]:
        return {"endpoint_name": {"S": name}}

    def _write(self, operation: str, **arguments: Any) -> dict[str, Any]:
        """A conditional put/update/delete; raises `ConditionLost` when its condition fails."""
        try:
            return self._call(operation, ReturnValuesOnConditionCheckFailure="ALL_OLD", **arguments)
        except ClientError as error:
            item: Any = error.response.get("Item")
            raise ConditionLost(parse_record(from_item(item)) if item else None) from None

    def _call(self, operation: str, **arguments: Any) -> dict[str, Any]:
        """One DynamoDB call on the table (retried by the client's adaptive mode); failures converted."""
        return self._call_client(operation, TableName=self.table_name, **arguments)

    def _call_client(self, operation: str, **arguments: Any) -> dict[str, Any]:
        try:
            response: dict[str, Any] = getattr(self.client, operation)(**arguments)
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
