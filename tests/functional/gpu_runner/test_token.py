"""The runner's model token from Secrets Manager (the moto server): a plain or JSON secret read into
HF_TOKEN; a missing secret or key fails naming the secret, never a value; nothing named, nothing done."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gco import aws
from gco.local.moto.motoserver import MotoServer
from gpu_runner.model_token import load_model_token
from gpu_runner.runner import RunnerError

VALUE = "hf_" + "q" * 34


@pytest.fixture
def secrets(moto: MotoServer) -> Any:
    client = aws.client("secretsmanager", region="us-east-1", endpoint_url=moto.url)
    client.create_secret(Name="gco/hf-token", SecretString=VALUE)
    client.create_secret(Name="gco/tokens", SecretString=json.dumps({"hf": VALUE, "n": 1}))
    return client


def test_a_plain_secret_becomes_hf_token(secrets: Any) -> None:
    environ = {"GCO_MODEL_TOKEN_SECRET": "gco/hf-token"}
    assert load_model_token(secrets, environ) is True
    assert environ["HF_TOKEN"] == VALUE


def test_a_json_secret_s_key_becomes_hf_token(secrets: Any) -> None:
    environ = {"GCO_MODEL_TOKEN_SECRET": "gco/tokens", "GCO_MODEL_TOKEN_KEY": "hf"}
    assert load_model_token(secrets, environ) is True
    assert environ["HF_TOKEN"] == VALUE


def test_nothing_named_nothing_done(secrets: Any) -> None:
    environ: dict[str, str] = {}
    assert load_model_token(secrets, environ) is False
    assert environ == {}


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {"GCO_MODEL_TOKEN_SECRET": "gco/absent"},
            "model token secret 'gco/absent': ResourceNotFoundException",
        ),
        (
            {"GCO_MODEL_TOKEN_SECRET": "gco/tokens", "GCO_MODEL_TOKEN_KEY": "n"},
            "model token secret 'gco/tokens' has no string key 'n'",
        ),
        (
            {"GCO_MODEL_TOKEN_SECRET": "gco/hf-token", "GCO_MODEL_TOKEN_KEY": "hf"},
            "model token secret 'gco/hf-token' is not JSON, so it has no key 'hf'",
        ),
    ],
)
def test_a_failure_names_the_secret_and_never_its_value(
    secrets: Any, environ: dict[str, str], message: str
) -> None:
    with pytest.raises(RunnerError) as caught:
        load_model_token(secrets, environ)
    assert str(caught.value) == message
    assert VALUE not in str(caught.value) and "HF_TOKEN" not in environ
