"""Direct JSON answers for the local moto server's hot DynamoDB calls: the same body, far less CPU.

moto 5 writes every response through its generic, model-driven serializer. For the calls that
carry whole items (GetItem, BatchGetItem, PutItem, UpdateItem, DeleteItem, Query, Scan) and for
GetRecords (its records carry both item images: the table's stream is NEW_AND_OLD_IMAGES) that
costs about 10 ms per item on these machines: a GetRecords of 100 records took over a second, and
the server, which applies one request at a time, saturated at a few dozen endpoint writes a
second. That is a cost of the stand-in, not of DynamoDB (single-digit milliseconds a call), so
these answers are written straight from the backend's result as the JSON 1.0 protocol writes them:
binary values in base64, times in epoch seconds, absent members left out. Every other call keeps
moto's serializer. A stream record's JSON is written once and kept (`EncodedRecords`): each
Region's poller reads every record.
"""

from __future__ import annotations

import base64
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

ITEM_OPERATIONS = frozenset(
    {"GetItem", "BatchGetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan"}
)
CONTENT_TYPE = "application/x-amz-json-1.0"
RECORDS_KEPT = 20_000  # stream records whose JSON is kept (a few per endpoint write)


def _time(value: datetime) -> float:
    moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return moment.timestamp()


def _wire(value: Any) -> Any:
    """A value of an item call's or stream record's result that JSON cannot write, as the protocol
    writes it (moto keeps binary attribute values raw, in items and in stream images)."""
    if isinstance(value, datetime):
        return _time(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _present(value: Any) -> Any:
    """`value` without None members (the protocol leaves an absent member out)."""
    if isinstance(value, dict):
        return {key: _present(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_present(item) for item in value]
    return value


def _protocol_json(value: dict[str, Any]) -> str:
    return json.dumps(_present(value), default=_wire, separators=(",", ":"))


def item_body(result: dict[str, Any]) -> str:
    """The JSON 1.0 response body of an item call's backend result."""
    return _protocol_json(result)


def record_json(record: dict[str, Any]) -> str:
    """One stream record as GetRecords' answer writes it."""
    return _protocol_json(record)


class EncodedRecords:
    """Each stream record's JSON, written once and kept: every Region's poller reads every record.

    moto keeps a stream record as one dict for its life (its `to_json` answers that dict), so the
    dict's identity names it; the dict is held with its text, so the identity is not reused while
    kept. The `size` most recent records are kept (a record is read again only by a poller behind
    the others, or after a failure).
    """

    def __init__(
        self, size: int = RECORDS_KEPT, encode: Callable[[dict[str, Any]], str] = record_json
    ) -> None:
        self._kept: OrderedDict[int, tuple[dict[str, Any], str]] = OrderedDict()
        self._size = size
        self._encode = encode
        self._lock = threading.Lock()

    def __call__(self, record: dict[str, Any]) -> str:
        with self._lock:
            found = self._kept.get(id(record))
        if found is not None and found[0] is record:
            return found[1]
        text = self._encode(record)
        with self._lock:
            self._kept[id(record)] = (record, text)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        return text


def records_body(result: dict[str, Any], encoded: Callable[[dict[str, Any]], str] = record_json) -> str:
    """The GetRecords response body of the backend's answer (each record written by `encoded`)."""
    rest = json.dumps(_present({key: value for key, value in result.items() if key != "Records"}))
    records = ",".join(encoded(record) for record in result.get("Records") or [])
    return f'{rest[:-1]}{"," if len(rest) > 2 else ""}"Records":[{records}]}}'


def install() -> None:  # pragma: no cover - runs in the moto server process
    """Answer the item calls and GetRecords directly in this process's moto (before it serves)."""
    from moto.dynamodb.responses import DynamoResult
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    serialized: Callable[..., Any] = DynamoResult.execute_result

    def execute_result(self: DynamoResult, context: Any) -> Any:
        if context.operation_model.name in ITEM_OPERATIONS and isinstance(self.result, dict):
            return 200, {"Content-Type": CONTENT_TYPE}, item_body(self.result)
        return serialized(self, context)

    encoded = EncodedRecords()

    def get_records(self: DynamoDBStreamsHandler) -> str:
        limit = self._get_param("Limit")
        result = self.backend.get_records(self._get_param("ShardIterator"), 1000 if limit is None else limit)
        return records_body(result, encoded)

    DynamoResult.execute_result = execute_result
    DynamoDBStreamsHandler.get_records = get_records
