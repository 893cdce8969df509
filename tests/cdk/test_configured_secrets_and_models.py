"""The app with a model token secret for the runner and model sources for the endpoint pods (the
shipped cdk.json names neither): each grant exact, the names passed on, every nag pack clean."""

from __future__ import annotations

import json
import tempfile
from typing import Any

import pytest
from aws_cdk import App

from stacks.app import build_app, nag_findings
from stacks.config import parse_config
from tests.cdk.conftest import HOME, OTHER, cdk_json_config, iam_statements

SECRET = "gco/hf-token"


@pytest.fixture(scope="module")
def configured() -> tuple[Any, Any]:
    raw = cdk_json_config()
    raw["runner"] = {**raw.get("runner", {}), "model_token_secret": SECRET, "model_token_key": "token"}
    raw["model_sources"] = ["s3://my-models/llama/", "s3://shared-weights/"]
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
