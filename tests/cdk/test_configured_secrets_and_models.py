"""The app with a model token secret for the runner, model sources for the endpoint pods and secrets
endpoints may name (the shipped cdk.json names none): each grant exact, the names passed on, every nag
pack and cfn-lint clean."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App

from stacks.app import build_app, nag_findings
from stacks.config import ConfigError, parse_config
from tests.cdk.conftest import HOME, OTHER, cdk_json_config, iam_statements
from tests.cdk.test_cfn_lint import lint

SECRET = "gco/hf-token"
ENDPOINT_SECRET_ARN = f"arn:aws:secretsmanager:{OTHER}:123456789012:secret:team/api-key-AbCdEf"
ENDPOINT_SECRETS = ["team/hf", ENDPOINT_SECRET_ARN]
SECRET_KEYS = [
    f"arn:aws:kms:{HOME}:123456789012:key/0123abcd-0123-4567-89ab-0123456789ab",
    f"arn:aws:kms:{OTHER}:123456789012:key/1123abcd-0123-4567-89ab-0123456789ab",
]


@pytest.fixture(scope="module")
def configured() -> tuple[Any, Any]:
    raw = cdk_json_config()
    raw["runner"] = {**raw.get("runner", {}), "model_token_secret": SECRET, "model_token_key": "token"}
    raw["model_sources"] = ["s3://my-models/llama/", "s3://shared-weights/"]
    raw["endpoint_secrets"] = ENDPOINT_SECRETS
    raw["endpoint_secret_kms_keys"] = SECRET_KEYS
    app = App(outdir=tempfile.mkdtemp(prefix="gco-cdk-test-"))
    gco = build_app(parse_config(raw), app=app)
    return gco, app.synth()


def template(assembly: Any, name: str) -> dict[str, Any]:
    return assembly.get_stack_by_name(name).template  # type: ignore[no-any-return]


def by_sid(template_json: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        statement["Sid"]: statement for _, statement in iam_statements(template_json) if "Sid" in statement
    }


def test_no_unsuppressed_finding(configured: tuple[Any, Any]) -> None:
    assert nag_findings(configured[1]) == []


def test_the_runner_reads_only_its_token_secret_and_gets_its_name(configured: tuple[Any, Any]) -> None:
    runner = template(configured[1], "gco-runner")
    statements = by_sid(runner)
    read = statements["ReadModelToken"]
    assert read["Action"] == "secretsmanager:GetSecretValue"
    parts = read["Resource"]["Fn::Join"][1]
    assert parts[-1] == f":secret:{SECRET}-??????" and f":secretsmanager:{HOME}:" in "".join(
        p for p in parts if isinstance(p, str)
    )
    script = json.dumps(
        next(r for r in runner["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate")["Properties"]
    )
    assert f"-e GCO_MODEL_TOKEN_SECRET={SECRET} -e GCO_MODEL_TOKEN_KEY=token" in script


def test_the_endpoint_pods_role_reads_the_sources_and_the_reconciler_knows_them(
    configured: tuple[Any, Any],
) -> None:
    regional = template(configured[1], f"gco-regional-{OTHER}")
    statements = by_sid(regional)
    assert statements["ReadModels"]["Action"] == "s3:GetObject"
    functions = [r for r in regional["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    sources = {
        f["Properties"]["Environment"]["Variables"].get("GCO_MODEL_SOURCES")
        for f in functions
        if "Environment" in f["Properties"]
    }
    assert "s3://my-models/llama/,s3://shared-weights/" in sources
    assert regional["Outputs"]["ModelSources"]["Value"] == "s3://my-models/llama/,s3://shared-weights/"


def test_the_reconciler_may_read_only_the_configured_endpoint_secrets_and_knows_them(
    configured: tuple[Any, Any],
) -> None:
    regional = template(configured[1], f"gco-regional-{OTHER}")
    reads = [
        statement
        for _, statement in iam_statements(regional)
        if "secretsmanager:GetSecretValue" in json.dumps(statement.get("Action"))
    ]
    assert len(reads) == 1 and reads[0]["Sid"] == "EndpointSecrets"
    assert reads[0]["Action"] == "secretsmanager:GetSecretValue" and reads[0]["Effect"] == "Allow"
    by_name, by_arn = reads[0]["Resource"]
    parts = by_name["Fn::Join"][1]
    # A name is read in the home Region, with the six characters Secrets Manager appends to its ARN.
    assert parts[-1] == ":secret:team/hf-??????" and f":secretsmanager:{HOME}:" in "".join(
        p for p in parts if isinstance(p, str)
    )
    assert by_arn == ENDPOINT_SECRET_ARN
    functions = [r for r in regional["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    allowed = {
        f["Properties"]["Environment"]["Variables"].get("GCO_ENDPOINT_SECRETS")
        for f in functions
        if "Environment" in f["Properties"]
    }
    assert ",".join(ENDPOINT_SECRETS) in allowed


def test_the_reconciler_may_decrypt_with_the_configured_secret_keys_only_through_secrets_manager(
    configured: tuple[Any, Any],
) -> None:
    """A secret under a customer managed key is readable: `kms:Decrypt` on exactly the configured keys,
    only when Secrets Manager of the key's Region calls KMS on the reconciler's behalf."""
    regional = template(configured[1], f"gco-regional-{OTHER}")
    decrypts = [
        statement
        for _, statement in iam_statements(regional)
        if any(arn in json.dumps(statement.get("Resource")) for arn in SECRET_KEYS)
    ]
    assert len(decrypts) == 1
    grant = decrypts[0]
    assert grant["Sid"] == "EndpointSecretKeysViaSecretsManager" and grant["Effect"] == "Allow"
    assert grant["Action"] == "kms:Decrypt" and grant["Resource"] == SECRET_KEYS
    assert grant["Condition"] == {
        "StringEquals": {
            "kms:ViaService": [f"secretsmanager.{r}.amazonaws.com" for r in sorted((HOME, OTHER))]
        }
    }


def test_a_secret_key_that_is_not_a_key_arn_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"gco.endpoint_secret_kms_keys.*not a KMS key ARN"):
        parse_config({**cdk_json_config(), "endpoint_secret_kms_keys": ["alias/mine"]})


def test_the_configured_regional_template_passes_cfn_lint(
    configured: tuple[Any, Any], tmp_path: Path
) -> None:
    regional = template(configured[1], f"gco-regional-{OTHER}")
    errors = [f for f in lint(regional, tmp_path, "regional") if f["Level"] == "Error"]
    assert errors == []
