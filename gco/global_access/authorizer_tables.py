"""The authorizer's two reads, from its own Region's replicas: the `Tables` port's DynamoDB adapter.

One `GetItem` each: the key through the keys table's adapter (`key_store.DynamoKeyStore`), the
endpoint's record here (eventually consistent: every write to it goes to the home Region, and a
replica's consistent read would see no newer item than the replication brought; "Read consistency
for global tables", DynamoDB Developer Guide,
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/V2globaltables_HowItWorks.html).
The requests are bounded (`gco.aws.bound_requests`): API Gateway waits at most 29 s for an
authorizer, and a caller is better served by a quick 500 than by a stalled request.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from gco import aws
from gco.endpoints.codec import from_item
from gco.endpoints.errors import StoreUnavailableError
from gco.endpoints.serving import ServingRecord, parse_serving
from gco.global_access.key_store import DynamoKeyStore
from gco.global_access.keys import ApiKey

ENDPOINT_ATTRIBUTE = "endpoint_name"
READ_TIMEOUT_S = 2.0  # each attempt; two attempts in all (`gco.aws.REQUEST_ATTEMPTS`)


class DynamoTables:
    """`gco.global_access.authorizer.Tables` over one Region's replicas of the two tables."""

    def __init__(self, *, region: str, keys_table: str, endpoints_table: str, client: Any = None) -> None:
        if client is None:
            aws.bound_requests(READ_TIMEOUT_S)
            client = aws.client("dynamodb", region=region)
        self._client, self._endpoints = client, endpoints_table
        self._keys = DynamoKeyStore(client, keys_table)

    def _get(self, table: str, attribute: str, value: str) -> dict[str, Any] | None:
        """The item's plain values, or None (botocore's errors pass to the caller, who names them)."""
        answer = self._client.get_item(TableName=table, Key={attribute: {"S": value}})
        item = answer.get("Item")
        return from_item(item) if item else None

    def api_key(self, key_id: str) -> ApiKey | None:
        """The key's record, or None (`DynamoKeyStore.get`, the keys table's one adapter).

        Raises:
            KeyStoreError: the table cannot be read, or holds a record that is not a key's.
        """
        return self._keys.get(key_id)

    def endpoint(self, name: str) -> ServingRecord | None:
        """The endpoint's record's serving fields (`parse_serving`), or None.

        Raises:
            StoreUnavailableError: the table cannot be read.
            MalformedRecordError: the stored item is not a record.
        """
        try:
            data = self._get(self._endpoints, ENDPOINT_ATTRIBUTE, name)
        except (ClientError, BotoCoreError) as error:
            raise StoreUnavailableError(f"cannot read {self._endpoints}: {error}") from error
        return None if data is None else parse_serving(data)
