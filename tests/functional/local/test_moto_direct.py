"""The local moto server's direct DynamoDB dispatch answers as moto's routing does, errors included."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from werkzeug.serving import make_server

from gco import aws
from gco.endpoints import init_table
from gco.local.moto.moto_direct import DYNAMODB_TARGET, STREAMS_TARGET, DirectDispatch, kept_method_names
from tests.functional.loopback import serving

StartResponse = Any


class CountingApp:
    """moto's own WSGI app, counting the requests that reach it."""

    def __init__(self) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        self.app = DomainDispatcherApplication(create_backend_app)
        self.targets: list[str] = []

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        self.targets.append(str(environ.get("HTTP_X_AMZ_TARGET") or environ.get("PATH_INFO")))
        return self.app(environ, start_response)  # type: ignore[no-any-return]


@pytest.fixture
def served() -> Iterator[tuple[str, CountingApp]]:
    fallback = CountingApp()
    with serving(make_server("127.0.0.1", 0, DirectDispatch(fallback), threaded=True)) as url:
        yield url, fallback


def test_dynamodb_calls_skip_moto_routing_and_answer_as_it_does(served: tuple[str, CountingApp]) -> None:
    url, fallback = served
    table = "direct-dispatch"
    client = aws.client("dynamodb", endpoint_url=url, region="us-east-1")
    init_table(client, table)  # the endpoint table, with its stream
    client.put_item(TableName=table, Item={"endpoint_name": {"S": "a"}, "n": {"N": "1"}})
    with pytest.raises(ClientError) as refused:
        client.put_item(
            TableName=table,
            Item={"endpoint_name": {"S": "a"}},
            ConditionExpression="attribute_not_exists(endpoint_name)",
        )
    assert refused.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError) as missing:
        client.get_item(TableName="no-such-table", Key={"endpoint_name": {"S": "a"}})
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert client.get_item(TableName=table, Key={"endpoint_name": {"S": "a"}})["Item"]["n"] == {"N": "1"}
    streams = aws.client("dynamodbstreams", endpoint_url=url, region="us-east-1")
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    assert [record["eventName"] for record in records] == ["INSERT"]
    assert fallback.targets == []  # none of them went through moto's routing
    s3 = aws.client("s3", endpoint_url=url, region="us-east-1")
    s3.create_bucket(Bucket="routed-by-moto")
    assert "routed-by-moto" in [bucket["Name"] for bucket in s3.list_buckets()["Buckets"]]
    assert len(fallback.targets) == 2


@pytest.mark.parametrize(
    ("environ", "direct"),
    [
        (
            {"REQUEST_METHOD": "POST", "PATH_INFO": "/", "HTTP_X_AMZ_TARGET": f"{DYNAMODB_TARGET}.GetItem"},
            True,
        ),
        (
            {"REQUEST_METHOD": "POST", "PATH_INFO": "", "HTTP_X_AMZ_TARGET": f"{STREAMS_TARGET}.GetRecords"},
            True,
        ),
        (
            {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "HTTP_X_AMZ_TARGET": f"{DYNAMODB_TARGET}.GetItem"},
            False,
        ),
        (
            {"REQUEST_METHOD": "POST", "PATH_INFO": "/x", "HTTP_X_AMZ_TARGET": f"{DYNAMODB_TARGET}.GetItem"},
            False,
        ),
        (
            {
                "REQUEST_METHOD": "POST",
                "PATH_INFO": "/",
                "HTTP_X_AMZ_TARGET": "AWSStepFunctions.StartExecution",
            },
            False,
        ),
        ({"REQUEST_METHOD": "POST", "PATH_INFO": "/", "HTTP_X_AMZ_TARGET": DYNAMODB_TARGET}, False),
        ({"REQUEST_METHOD": "POST", "PATH_INFO": "/"}, False),
    ],
)
def test_only_json_protocol_calls_of_dynamodb_and_its_streams_go_direct(
    environ: dict[str, Any], direct: bool
) -> None:
    handlers = {DYNAMODB_TARGET: "dynamodb", STREAMS_TARGET: "streams"}
    dispatch = DirectDispatch(lambda environ, start_response: [], handlers=handlers)
    assert (dispatch.handler_for(environ) is not None) is direct


def test_a_handler_class_method_names_are_listed_once() -> None:
    calls: list[type] = []

    def names(cls: Any) -> list[str]:
        calls.append(cls)
        return sorted(name for name in vars(cls) if callable(getattr(cls, name)))

    kept = kept_method_names(names)
    assert kept(CountingApp) == kept(CountingApp) == ["__call__", "__init__"]
    assert calls == [CountingApp]
