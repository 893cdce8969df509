"""Runner cleanup: an aborted or timed-out execution still gets its instance terminated."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Capture, Match

from tests.cdk.synth_cache import Synthesized, state_machine_definition


def test_rule_matches_failure_abort_and_timeout_of_the_workflow(global_template: Any) -> None:
    global_template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "Name": "gco-gpu-runner-cleanup",
            "EventPattern": {
                "source": ["aws.states"],
                "detail-type": ["Step Functions Execution Status Change"],
                "detail": {
                    "status": ["FAILED", "ABORTED", "TIMED_OUT"],
                    "stateMachineArn": [Match.any_value()],
                },
            },
            "Targets": [
                Match.object_like({"DeadLetterConfig": Match.any_value(), "RoleArn": Match.any_value()})
            ],
        },
    )


def test_cleanup_finds_by_job_tag_and_terminates(synthesized: Synthesized) -> None:
    states = state_machine_definition(synthesized.template_json("gco-global"), "gco-gpu-runner-cleanup")[
        "States"
    ]
    filters = states["FindInstance"]["Parameters"]["Filters"]
    assert filters[0]["Values.$"] == "States.Array(States.Format('jobs/{}.json', $.detail.name))"
    assert filters[1] == {"Name": "tag:gco-runner", "Values": ["gco-gpu-runner"]}
    assert states["AnyInstance"]["Choices"][0]["Next"] == "Terminate"
    assert states["Terminate"]["Resource"].endswith(":states:::aws-sdk:ec2:terminateInstances")


def test_trigger_role_may_only_start_the_cleanup(global_template: Any) -> None:
    policy = Capture()
    global_template.has_resource_properties(
        "AWS::IAM::ManagedPolicy",
        {"ManagedPolicyName": "gco-gpu-runner-cleanup-trigger-us-east-1", "PolicyDocument": policy},
    )
    statements = policy.as_object()["Statement"]
    assert [s["Action"] for s in statements] == ["states:StartExecution"]
    assert "Ref" in json.dumps(statements[0]["Resource"])
