"""`gco inference deploy|update` refuse a `model_source` outside the prefixes that `GCO_MODEL_SOURCES`
names (the Regional stack's `ModelSources` output): exit 2, one line naming the field and the
prefixes, nothing written."""

from __future__ import annotations

import pytest

from gco import aws
from gco.endpoints import EndpointStore
from gco.local.moto.motoserver import MotoServer
from tests.functional.cli.test_inference_cli import Cli, table_items

IMAGE = "vllm/vllm-openai:v0.6.3"


@pytest.fixture
def cli(store: EndpointStore, moto: MotoServer, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto, capsys)


def test_deploy_and_update_refuse_a_source_outside_the_prefixes(
    cli: Cli, store: EndpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GCO_MODEL_SOURCES", "s3://models/llama/")
    deploy = ("inference", "deploy", "m", "--region", "us-east-1", "--image", IMAGE)
    _, err = cli(*deploy, "--model-source", "s3://models/qwen/7b", code=2)
    assert err == (
        "error: model_source: s3://models/qwen/7b is outside the model sources endpoint pods may read "
        "(s3://models/llama/)\n"
    )
    assert table_items(store) == []
    s3 = aws.client("s3", endpoint_url=cli.server.url, region="us-east-1")
    s3.create_bucket(Bucket="models")
    s3.put_object(Bucket="models", Key="llama/8b/model.safetensors", Body=b"weights")
    cli(*deploy, "--model-source", "s3://models/llama/8b")  # sized from the source (test_model_size.py)
    before = table_items(store)
    _, err = cli("inference", "update", "m", "--model-source", "s3://elsewhere/x", code=2)
    assert "model_source: s3://elsewhere/x is outside" in err and err.count("\n") == 1
    assert table_items(store) == before
    monkeypatch.setenv("GCO_MODEL_SOURCES", "none")
    _, err = cli("inference", "update", "m", "--model-source", "s3://models/llama/8b", code=2)
    assert "no model sources are configured" in err
