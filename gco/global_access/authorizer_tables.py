"""The authorizer's two reads, from its own Region's replicas: the `Tables` port's DynamoDB adapter.

One `GetItem` each (eventually consistent: a replica serves strongly consistent reads only of
writes made in its own Region, and every write goes to the home Region, so a consistent read
would add cost and nothing else; "Read consistency for global tables", DynamoDB Developer Guide,
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/V2globaltables_HowItWorks.html).
The requests are bounded (`gco.aws.bound_requests`): API Gateway waits at most 29 s for an
authorizer, and a caller is better served by a quick 500 than by a stalled request.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from gco import aws
from gco.endpoints.codec import from_item
from gco.endpoints.errors import StoreUnavailableError
from gco.endpoints.record import EndpointRecord, parse_record
from gco.global_access.errors import KeyStoreError
from gco.global_access.keys import ApiKey

KEY_ATTRIBUTE = "key_id"
ENDPOINT_ATTRIBUTE = "endpoint_name"
READ_TIMEOUT_S = 2.0  # each attempt; two attempts in all (`gco.aws.REQUEST_ATTEMPTS`)


class DynamoTables:
    """`gco.global_access.authorizer.Tables` over one Region's replicas of the two tables."""

    def __init__(self, *, region: str, keys_table: str, endpoints_table: str, client: Any = None) -> None:
        if client is None:
            aws.bound_requests(READ_TIMEOUT_S)
            client = aws.client("dynamodb", region=region)
        self._client, self._keys, self._endpoints = client, keys_table, endpoints_table

    def _get(self, table: str, attribute: str, value: str) -> dict[str, Any] | None:
        """The item's plain values, or None (botocore's errors pass to the caller, who names them)."""
        answer = self._client.get_item(TableName=table, Key={attribute: {"S": value}})
        item = answer.get("Item")
        return from_item(item) if item else None

    def api_key(self, key_id: str) -> ApiKey | None:
        """The key's record, or None.

        Raises:
            KeyStoreError: the table cannot be read, or holds a record that is not a key's.
        """
        try:
            data = self._get(self._keys, KEY_ATTRIBUTE, key_id)
        except (ClientError, BotoCoreError) as error:
            raise KeyStoreError(f"cannot read {self._keys}: {error}") from error
        if data is None:
            return None
        try:
            return ApiKey.model_validate(data)
        except ValidationError as error:
            raise KeyStoreError(f"{self._keys}: the record of key {key_id} is malformed") from error

    def endpoint(self, name: str) -> EndpointRecord | None:
        """The endpoint's record, or None.

        Raises:
            StoreUnavailableError: the table cannot be read.
            MalformedRecordError: the stored item is not a record.
        """
        try:
            data = self._get(self._endpoints, ENDPOINT_ATTRIBUTE, name)
        except (ClientError, BotoCoreError) as error:
            raise StoreUnavailableError(f"cannot read {self._endpoints}: {error}") from error
        return None if data is None else parse_record(data)
