"""A model's size read from its S3 source over the moto server's HTTP API (ListObjectsV2, every page),
and `gco inference deploy|update` storing it or refusing a model no GPU node can hold, nothing written."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.config import Config

from gco import aws
from gco.admission.errors import ModelSizeError
from gco.admission.model_size import GIB, S3SourceSizer, size_gib, sync_prefix
from gco.endpoints import EndpointStore
from gco.endpoints.errors import InvalidSpecError
from gco.env import GPU_INSTANCE_TYPES_ENV
from gco.local.moto.motoserver import MotoServer
from gco.reconcile.environment import GPU_DISK_GIB_ENV
from gco.reconcile.heartbeat import HeartbeatWriter, SsmParameters
from tests.functional.cli.test_inference_cli import Cli, table_items

BUCKET = "models"
IMAGE = "vllm/vllm-openai:v0.6.3"
DEPLOY = ("inference", "deploy", "m", "--region", "us-east-1", "--image", IMAGE)


@pytest.fixture
def s3(moto: MotoServer) -> Any:
    client = aws.client("s3", endpoint_url=moto.url, region="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def cli(store: EndpointStore, moto: MotoServer, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto, capsys)


def size_of(store: EndpointStore, name: str) -> int | None:
    record = store.get(name)
    assert record is not None
    return record.spec.model_size_gib


def put(s3: Any, key: str, size: int) -> None:
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"w" * size)


def test_the_sync_prefix_is_the_source_as_a_directory() -> None:
    assert sync_prefix("s3://models/llama/8b") == ("models", "llama/8b/")
    assert sync_prefix("s3://models/llama/8b/") == ("models", "llama/8b/")
    assert sync_prefix("s3://models") == ("models", "")
    assert (size_gib(1), size_gib(GIB), size_gib(GIB + 1)) == (1, 1, 2)


def test_every_page_is_summed_and_a_sibling_prefix_is_not(s3: Any) -> None:
    sizes = [100, 200, 300, 400, 500]
    for index, size in enumerate(sizes):
        put(s3, f"llama/8b/part-{index}.safetensors", size)
    put(s3, "llama/8b-instruct/other.safetensors", 10_000)  # what `aws s3 sync .../8b` does not copy
    pages: list[int] = []
    s3.meta.events.register("before-call.s3.ListObjectsV2", lambda **_: pages.append(1))
    sizer = S3SourceSizer(s3, page_size=2)
    assert sizer.size_bytes("s3://models/llama/8b") == sum(sizes)
    assert len(pages) == 3  # 2 + 2 + 1 keys: the continuation token was followed
    assert S3SourceSizer(s3).size_bytes(f"s3://{BUCKET}/llama/") == sum(sizes) + 10_000


def test_a_missing_prefix_or_bucket_is_bad_input_naming_the_field(s3: Any) -> None:
    put(s3, "llama/8b/model.safetensors", 10)
    sizer = S3SourceSizer(s3)
    with pytest.raises(InvalidSpecError) as raised:
        sizer.size_bytes("s3://models/qwen/7b")
    assert (
        str(raised.value)
        == "model_source: s3://models/qwen/7b: no object under s3://models/qwen/7b/, nothing to sync"
    )
    with pytest.raises(InvalidSpecError) as raised:
        sizer.size_bytes("s3://no-such-bucket/x")
    assert str(raised.value) == "model_source: s3://no-such-bucket/x: bucket no-such-bucket does not exist"


def test_a_listing_that_fails_otherwise_asks_for_the_size(moto: MotoServer) -> None:
    closed = "http://127.0.0.1:9"  # the discard port: nothing listens on loopback
    client = aws.session().create_client(
        "s3",
        region_name="us-east-1",
        endpoint_url=closed,
        config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=2),
    )
    with pytest.raises(ModelSizeError) as raised:
        S3SourceSizer(client).size_bytes("s3://models/llama/8b")
    assert str(raised.value).startswith("model_source: cannot list s3://models/llama/8b to size the model (")
    assert str(raised.value).endswith("); give model_size_gib")


def test_deploy_stores_the_size_read_from_the_source(cli: Cli, s3: Any, store: EndpointStore) -> None:
    put(s3, "llama/8b/model.safetensors", 1000)
    put(s3, "llama/70b/model.safetensors", 1000)
    cli(*DEPLOY, "--model-source", "s3://models/llama/8b")
    assert size_of(store, "m") == 1  # 1000 bytes, in whole GiB rounded up
    cli(*DEPLOY[:2], "given", *DEPLOY[3:], "--model-source", "s3://models/llama/8b", "--model-size-gib", "7")
    assert size_of(store, "given") == 7  # a size the spec gives is not read
    cli("inference", "update", "given", "--replicas", "2")
    assert size_of(store, "given") == 7  # an update that names no source keeps the size
    cli("inference", "update", "given", "--model-source", "s3://models/llama/70b")
    assert size_of(store, "given") == 1  # a new source without a size is read again
    _, err = cli("inference", "update", "given", "--model-source", "s3://models/qwen/7b", code=2)
    assert err.startswith("error: model_source: s3://models/qwen/7b: no object under")


def test_deploy_refuses_a_missing_source_and_writes_nothing(cli: Cli, s3: Any, store: EndpointStore) -> None:
    _, err = cli(*DEPLOY, "--model-source", "s3://models/qwen/7b", code=2)
    assert (
        err
        == "error: model_source: s3://models/qwen/7b: no object under s3://models/qwen/7b/, nothing to sync\n"
    )
    assert table_items(store) == []


def test_a_model_no_gpu_node_holds_is_refused_naming_the_field(
    cli: Cli, s3: Any, store: EndpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(s3, "llama/8b/model.safetensors", 1000)  # 1 GiB, 2 GiB with the headroom
    monkeypatch.setenv(GPU_INSTANCE_TYPES_ENV, "p3.2xlarge")  # no instance store: the root volume holds it
    monkeypatch.setenv(GPU_DISK_GIB_ENV, "1")
    _, err = cli(*DEPLOY, "--model-source", "s3://models/llama/8b", code=2)
    assert err == (
        "error: model_size_gib: 1 GiB (read from s3://models/llama/8b) needs 2 GiB of node storage (with "
        "10% headroom), more than any GPU node here offers (p3.2xlarge 1 GiB root volume)\n"
    )
    assert table_items(store) == []
    monkeypatch.setenv(GPU_DISK_GIB_ENV, "2")
    cli(*DEPLOY, "--model-source", "s3://models/llama/8b")
    before = table_items(store)
    _, err = cli("inference", "update", "m", "--model-size-gib", "40", code=2)
    assert (
        err.startswith("error: model_size_gib: 40 GiB needs 44 GiB of node storage") and err.count("\n") == 1
    )
    assert table_items(store) == before


def test_a_hub_model_without_a_size_is_noted_where_the_nodes_are_known(
    cli: Cli, store: EndpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = (*DEPLOY, "--model-id", "Qwen/Qwen2.5-7B")
    # us-east-1's reconciler is live (its sweep's heartbeat): the only warning left is the one tested
    ssm = aws.client("ssm", region="us-east-1", endpoint_url=cli.server.url)
    assert HeartbeatWriter(SsmParameters(ssm), store.table_name, 5.0).beat("us-east-1")
    _, err = cli(*hub)
    assert err == ""
    monkeypatch.setenv(GPU_INSTANCE_TYPES_ENV, "g6e.xlarge")
    _, err = cli("inference", "deploy", "n", *hub[3:])
    assert err == (
        "warning: model_size_gib not given and the Hugging Face Hub is not read: the pod of "
        "Qwen/Qwen2.5-7B requests no model storage and its size is not checked\n"
    )
    assert size_of(store, "n") is None
