"""The stream-ARN custom resource: inline handler, and properties that change with the stream."""

from __future__ import annotations

from typing import Any

from stacks.constructs.data import STREAM_VIEW, stream_identity
from stacks.constructs.stream_lookup import HANDLER
from tests.cdk.conftest import HOME, OTHER, Synthesized


def lookup(template: dict[str, Any]) -> dict[str, Any]:
    (resource,) = [r for r in template["Resources"].values() if r["Type"] == "Custom::GcoStreamArn"]
    properties: dict[str, Any] = resource["Properties"]
    return properties


def test_lookup_runs_again_when_the_stream_identity_changes(synthesized: Synthesized) -> None:
    for region in (HOME, OTHER):
        properties = lookup(synthesized.template_json(f"gco-regional-{region}"))
        assert properties["TableName"] == "gco-inference-endpoints"
        assert properties["StreamViewType"] == STREAM_VIEW.value == "NEW_AND_OLD_IMAGES"
        assert properties["ReplicaRegions"] == OTHER
    # Adding or dropping a replica (a new stream in that Region) changes the properties: CloudFormation
    # sends an Update, and the handler answers with the new stream's ARN.
    assert stream_identity([OTHER]) != stream_identity([OTHER, "eu-west-1"]) != stream_identity([])
    assert stream_identity(["eu-west-1", OTHER]) == stream_identity([OTHER, "eu-west-1"])


def test_the_inline_code_is_the_tested_handler(synthesized: Synthesized) -> None:
    (function,) = [
        r["Properties"]
        for r in synthesized.template_json(f"gco-regional-{OTHER}")["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and "ZipFile" in r["Properties"].get("Code", {})
    ]
    assert function["Code"]["ZipFile"] == HANDLER
    assert "FAILED" in HANDLER and function["Timeout"] == 120
