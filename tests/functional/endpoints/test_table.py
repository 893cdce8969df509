"""init_table against the moto server: creation with its stream, idempotence, a creator race."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.config import Config

from gco import aws
from gco.endpoints import StoreUnavailableError, init_table, operations
from gco.endpoints.codec import to_item
from gco.endpoints.errors import TableMismatchError
from gco.endpoints.store import EndpointStore
from gco.endpoints.table import check_shape
from gco.local.moto.motoserver import MotoServer


def test_two_creators_race_and_both_get_the_table(dynamodb: Any) -> None:
    results: list[bool] = []
    barrier = threading.Barrier(2)

    def create() -> None:
        barrier.wait()
        results.append(init_table(dynamodb, "raced")[0])

    threads = [threading.Thread(target=create) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) in ([False, True], [True, True])  # moto may accept both creates
    assert dynamodb.describe_table(TableName="raced")["Table"]["TableStatus"] == "ACTIVE"


def test_a_table_without_the_stream_is_refused() -> None:
    table = {"TableName": "t", "KeySchema": [{"AttributeName": "endpoint_name", "KeyType": "HASH"}]}
    with pytest.raises(TableMismatchError, match="stream"):
        check_shape(table)


def test_unreachable_endpoint_is_store_unavailable(monkeypatch: pytest.MonkeyPatch, moto: MotoServer) -> None:
    monkeypatch.setattr(
        aws,
        "CLIENT_CONFIG",
        Config(retries={"mode": "standard", "max_attempts": 1}, connect_timeout=1, read_timeout=1),
    )
    client = aws.client("dynamodb", endpoint_url="http://127.0.0.1:9")
    with pytest.raises(StoreUnavailableError):
        init_table(client, "t")
    with pytest.raises(StoreUnavailableError):
        EndpointStore(client, "t").get("x")


def test_operations_back_fill_a_legacy_record_before_acting(store: EndpointStore) -> None:
    store.client.put_item(
        TableName=store.table_name,
        Item=to_item(
            {
                "endpoint_name": "old",
                "desired_state": "running",
                "target_regions": ["us-east-1"],
                "spec": {"image": "vllm/vllm-openai:v0.5.0"},
                "updated_at": "2025-01-01T00:00:00.000000Z",
            }
        ),
    )
    stopped = operations.stop(store, "old")
    assert stopped.desired_state == "stopped" and stopped.lifecycle_id is not None
    assert stopped.cleanup_regions == ["us-east-1"]


def test_loopback_endpoints_get_local_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    client = aws.client("dynamodb", endpoint_url="http://127.0.0.1:1")
    assert client._request_signer._credentials.access_key == "gco-local"
    assert aws.is_loopback("http://localhost:4566") and not aws.is_loopback("https://dynamodb.amazonaws.com")
    assert not aws.is_loopback(None)
    monkeypatch.delenv("DYNAMODB_REGION", raising=False)
    monkeypatch.setenv("REGION", "eu-west-1")
    assert aws.home_region() == "eu-west-1"


def test_clients_share_one_parsed_service_model_and_keep_gco_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-env")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "from-env")
    first = aws.client("dynamodb", endpoint_url="http://127.0.0.1:1")
    second = aws.client("dynamodb", endpoint_url="http://127.0.0.1:1")
    # one parse of the model for both: their models wrap the very same description the loader cached
    description = first.meta.service_model._service_description
    assert second.meta.service_model._service_description is description
    assert first.meta.service_model.service_name == "dynamodb"
    # each client still reads the credentials the environment holds now, and gco's configuration
    assert second._request_signer._credentials.access_key == "from-env"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "rotated")
    rotated = aws.client("dynamodb", endpoint_url="http://127.0.0.1:1")
    assert rotated._request_signer._credentials.access_key == "rotated"
    config: Any = second.meta.config  # botocore's Config declares its options at run time
    assert config.retries["mode"] == "adaptive" and config.read_timeout == 30
    assert config.max_pool_connections == aws.MAX_POOL_CONNECTIONS
