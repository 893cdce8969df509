"""Model sources: the prefixes endpoint pods may read, and the check that refuses a `model_source`
outside them, naming them."""

from __future__ import annotations

import pytest

from gco.endpoints.errors import InvalidSpecError
from gco.reconcile.model_sources import (
    S3Prefix,
    check_model_source,
    parse_prefixes,
    prefixes_from_env,
    refusal,
)

PREFIXES = parse_prefixes(["s3://models/llama/", "s3://shared-models/"])


@pytest.mark.parametrize(
    "source", ["s3://models/llama/8b", "s3://models/llama/", "s3://shared-models/x/y", "s3://shared-models/"]
)
def test_a_source_under_a_prefix_is_allowed(source: str) -> None:
    assert refusal(source, PREFIXES) is None


@pytest.mark.parametrize(
    "source", ["s3://models/llama-secret/x", "s3://models/qwen/7b", "s3://models", "s3://other/llama/"]
)
def test_a_source_outside_every_prefix_is_refused_naming_them(source: str) -> None:
    with pytest.raises(InvalidSpecError) as caught:
        check_model_source(source, PREFIXES)
    assert caught.value.field == "model_source"
    assert str(caught.value).endswith(
        f"{source} is outside the model sources endpoint pods may read (s3://models/llama/, s3://shared-models/)"
    )


def test_none_configured_refuses_every_source_and_unknown_refuses_nothing() -> None:
    assert refusal("s3://models/llama/8b", ()) == (
        "s3://models/llama/8b cannot be read: no model sources are configured (cdk.json gco.model_sources)"
    )
    assert refusal("s3://models/llama/8b", None) is None
    assert refusal(None, ()) is None


@pytest.mark.parametrize(
    "uri", ["s3://models/llama", "s3://Models/", "https://models/", "s3://models//x/", "s3://m/"]
)
def test_a_prefix_is_a_bucket_and_a_path_ending_in_a_slash(uri: str) -> None:
    with pytest.raises(ValueError, match="is not an s3://bucket/ or s3://bucket/prefix/ URI"):
        S3Prefix.parse(uri)


def test_the_environment_variable() -> None:
    assert prefixes_from_env({}) is None
    assert prefixes_from_env({"GCO_MODEL_SOURCES": ""}) == ()
    assert prefixes_from_env({"GCO_MODEL_SOURCES": "s3://models/llama/, s3://models/llama/"}) == (
        S3Prefix("models", "llama/"),
    )
    with pytest.raises(InvalidSpecError, match="GCO_MODEL_SOURCES"):
        prefixes_from_env({"GCO_MODEL_SOURCES": "s3://models/llama"})
