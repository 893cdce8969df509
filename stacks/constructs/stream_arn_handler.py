"""Custom resource: the LatestStreamArn of a table in this Region (deployed inline; stdlib and boto3 only).

CloudFormation waits for an answer at the presigned `ResponseURL` (up to an hour when none comes), so
every path answers: SUCCESS with the ARN, or FAILED with the reason, whatever went wrong (a missing
table, a table without a stream, a malformed request, an AWS error). The DynamoDB client's connect and
read timeouts and retries are bounded so that the answer is sent well within the function's timeout.
The physical id is the stream ARN: when the stream changes, the id changes and CloudFormation sees a
replacement (and the consumers of `StreamArn` are updated).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the stubs are a dev dependency; the Lambda runtime has boto3 alone
    from mypy_boto3_dynamodb import DynamoDBClient

REASON_LIMIT = 500


def _client() -> DynamoDBClient:
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 3, "mode": "standard"})
    return boto3.client("dynamodb", config=config)


def stream_arn(table_name: str, client: DynamoDBClient) -> str:
    """The table's LatestStreamArn; a ValueError when the table has no stream."""
    table = client.describe_table(TableName=table_name)["Table"]
    arn = table.get("LatestStreamArn")
    specification = table.get("StreamSpecification")
    if not arn or not (specification and specification.get("StreamEnabled")):
        raise ValueError(f"table {table_name} has no stream in this Region")
    return arn


def answer(event: Mapping[str, Any], client: DynamoDBClient | None = None) -> dict[str, Any]:
    """The response document for `event` (never raises)."""
    status, reason = "SUCCESS", "ok"
    data: dict[str, str] = {}
    physical = event.get("PhysicalResourceId") or event.get("LogicalResourceId") or "stream-arn"
    try:
        if event["RequestType"] != "Delete":
            name = event["ResourceProperties"]["TableName"]
            arn = stream_arn(name, client or _client())
            data, physical = {"StreamArn": arn}, arn
    except Exception as error:
        status, reason = "FAILED", f"{type(error).__name__}: {error}"[:REASON_LIMIT]
    return {
        "Status": status,
        "Reason": reason,
        "PhysicalResourceId": physical,
        "StackId": event.get("StackId", ""),
        "RequestId": event.get("RequestId", ""),
        "LogicalResourceId": event.get("LogicalResourceId", ""),
        "Data": data,
    }


def handler(event: Mapping[str, Any], context: object, client: DynamoDBClient | None = None) -> None:
    body = json.dumps(answer(event, client)).encode()
    request = urllib.request.Request(  # noqa: S310 - CloudFormation's presigned https URL
        event["ResponseURL"],
        data=body,
        method="PUT",
        headers={"Content-Type": "", "Content-Length": str(len(body))},
    )
    with urllib.request.urlopen(request, timeout=30):  # noqa: S310
        pass
