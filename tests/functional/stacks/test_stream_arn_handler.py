"""The stream-ARN custom resource's handler against the moto server, answering a local ResponseURL."""

from __future__ import annotations

import http.server
import json
from collections.abc import Iterator
from typing import Any

import pytest

from gco import aws
from gco.local.moto.motoserver import MotoServer
from stacks.constructs import stream_arn_handler
from stacks.constructs.stream_lookup import HANDLER, INLINE_LIMIT
from tests.functional.loopback import serving

TABLE = "gco-stream-test"


class _Answers(http.server.BaseHTTPRequestHandler):
    received: list[dict[str, Any]]

    def do_PUT(self) -> None:
        length = int(self.headers["Content-Length"])
        self.received.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def response_url() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """CloudFormation's presigned response URL, stood in for by a loopback server recording each PUT."""
    received: list[dict[str, Any]] = []
    handler = type("Answers", (_Answers,), {"received": received})
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)) as url:
        yield f"{url}/response", received


@pytest.fixture
def client(moto: MotoServer) -> Any:
    return aws.client("dynamodb", region="us-east-1", endpoint_url=moto.url)


def _table(client: Any, *, stream: bool = True) -> None:
    spec = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"} if stream else {}
    client.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "endpoint_name", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "endpoint_name", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        **({"StreamSpecification": spec} if stream else {}),
    )


def _event(url: str, request_type: str = "Create", **overrides: Any) -> dict[str, Any]:
    event = {
        "RequestType": request_type,
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/gco-regional/x",
        "RequestId": "req-1",
        "LogicalResourceId": "StreamArnResource",
        "ResourceProperties": {"TableName": TABLE, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    }
    return {**event, **overrides}


def test_inline_source_fits_cloudformation_limit() -> None:
    assert len(HANDLER) <= INLINE_LIMIT


def test_create_answers_the_stream_arn(client: Any, response_url: Any) -> None:
    url, received = response_url
    _table(client)
    stream_arn_handler.handler(_event(url), None, client=client)
    (answer,) = received
    arn = client.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    assert answer["Status"] == "SUCCESS"
    assert answer["Data"] == {"StreamArn": arn}
    assert answer["PhysicalResourceId"] == arn
    assert answer["RequestId"] == "req-1"


def test_missing_table_answers_failed_with_the_reason(client: Any, response_url: Any) -> None:
    url, received = response_url
    stream_arn_handler.handler(_event(url), None, client=client)
    (answer,) = received
    assert answer["Status"] == "FAILED"
    assert "ResourceNotFoundException" in answer["Reason"]
    assert answer["Data"] == {}


def test_table_without_stream_answers_failed(client: Any, response_url: Any) -> None:
    url, received = response_url
    _table(client, stream=False)
    stream_arn_handler.handler(_event(url), None, client=client)
    (answer,) = received
    assert answer["Status"] == "FAILED"
    assert "has no stream" in answer["Reason"]


def test_malformed_request_answers_failed(client: Any, response_url: Any) -> None:
    url, received = response_url
    stream_arn_handler.handler(_event(url, ResourceProperties={}), None, client=client)
    (answer,) = received
    assert answer["Status"] == "FAILED"
    assert answer["Reason"].startswith("KeyError")


def test_delete_answers_success_without_reading(response_url: Any) -> None:
    url, received = response_url
    unreadable: Any = object()  # no DynamoDB call succeeds on it: a Delete must not read the table
    stream_arn_handler.handler(_event(url, "Delete", PhysicalResourceId="arn:old"), None, client=unreadable)
    (answer,) = received
    assert answer["Status"] == "SUCCESS"
    assert answer["PhysicalResourceId"] == "arn:old"


def test_update_after_a_new_stream_answers_a_new_physical_id(client: Any, response_url: Any) -> None:
    url, received = response_url
    _table(client)
    first = client.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    client.delete_table(TableName=TABLE)  # a replica removed and added again: a new stream
    _table(client)
    second = client.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    stream_arn_handler.handler(_event(url, "Update", PhysicalResourceId=first), None, client=client)
    (answer,) = received
    assert answer["Status"] == "SUCCESS"
    assert answer["PhysicalResourceId"] == second == answer["Data"]["StreamArn"]
    assert second != first
