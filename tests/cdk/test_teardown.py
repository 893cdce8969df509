"""Teardown and redeploy: every resource a destroy keeps gets a name unique to its stack's creation,
except the endpoint table, which the runtime addresses by name (docs/deploy.md says how to drop or
move it)."""

from __future__ import annotations

import json
from typing import Any

from tests.cdk.conftest import Synthesized

NAME_KEYS = ("TableName", "BucketName", "LogGroupName", "QueueName", "TopicName", "RoleName", "FunctionName")
# The stack id's UUID, as stacks/constructs/retained.py selects it.
CREATION_ID = {"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]}


def kept(synthesized: Synthesized) -> list[tuple[str, str, Any]]:
    found = []
    for artifact in synthesized.assembly.stacks:
        for resource in artifact.template["Resources"].values():
            if resource.get("DeletionPolicy") == "Retain":
                for key in NAME_KEYS:
                    if key in resource.get("Properties", {}):
                        found.append((artifact.stack_name, resource["Type"], resource["Properties"][key]))
    return found


def test_kept_resources_are_named_per_stack_creation(synthesized: Synthesized) -> None:
    names = kept(synthesized)
    assert {kind for _, kind, _ in names} == {
        "AWS::DynamoDB::GlobalTable",
        "AWS::S3::Bucket",
        "AWS::Logs::LogGroup",
        "AWS::IAM::Role",  # API Gateway's logging role, which the account's setting names (api_account.py)
    }
    for stack, kind, name in names:
        if kind == "AWS::DynamoDB::GlobalTable":  # addressed by name: see docs/deploy.md, "Teardown"
            assert name in ("gco-inference-endpoints", "gco-api-keys")
            continue
        assert json.dumps(CREATION_ID) in json.dumps(name), (stack, kind, name)


def test_the_lambda_functions_log_to_their_kept_groups(synthesized: Synthesized) -> None:
    template = synthesized.template_json("gco-regional-us-east-1")
    groups = {
        logical_id
        for logical_id, r in template["Resources"].items()
        if r["Type"] == "AWS::Logs::LogGroup" and r.get("DeletionPolicy") == "Retain"
    }
    referenced = [
        r["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and isinstance(r["Properties"].get("LoggingConfig", {}).get("LogGroup"), dict)
    ]
    assert len(referenced) >= 3  # the stream and sweep reconcilers and the stream-ARN lookup
    assert set(referenced) <= groups
