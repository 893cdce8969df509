"""The GPU runner workflow in the global stack: its graph, its role, and what it names in the runner stack."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Capture, Match

from gco.validation.settings import QUEUE_TIMEOUT, MatrixSettings
from gpu_runner.job import JobMessage, MatrixJob
from tests.cdk.synth_cache import Synthesized, state_machine_definition


def test_state_machine_named_logged_traced(global_template: Any) -> None:
    global_template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "StateMachineName": "gco-gpu-runner",
            "TracingConfiguration": {"Enabled": True},
            "LoggingConfiguration": Match.object_like({"Level": "ALL", "IncludeExecutionData": False}),
        },
    )


def test_run_job_waits_on_task_token_with_heartbeats(synthesized: Synthesized) -> None:
    states = state_machine_definition(synthesized.template_json("gco-global"))["States"]
    run_job = states["RunJob"]
    assert run_job["Resource"].endswith(":states:::aws-sdk:s3:putObject.waitForTaskToken")
    # The runner is up (AwaitRunner) before the job is written: the heartbeat need not cover the boot.
    assert run_job["HeartbeatSeconds"] == 300
    assert run_job["TimeoutSeconds"] == 12 * 3600
    for handover in (states["AwaitRunner"], run_job):
        assert handover["Parameters"]["Body.$"].startswith("States.Format(")
        assert "$$.Task.Token, $$.Execution.Name" in handover["Parameters"]["Body.$"]
        assert handover["Parameters"]["Key.$"] == "States.Format('jobs/{}.json', $$.Execution.Name)"


def test_the_queue_timeout_bounds_the_wait_for_the_runner(synthesized: Synthesized) -> None:
    definition = state_machine_definition(synthesized.template_json("gco-global"))
    states = definition["States"]
    assert definition["StartAt"] == "ReadQueueTimeout"
    path = f"$.job.settings.{QUEUE_TIMEOUT}"
    choices = states["ReadQueueTimeout"]["Choices"]
    assert choices[0] == {"Variable": path, "IsPresent": False, "Next": "QueueFromDeployment"}
    assert {"Variable": path, "IsNumeric": True} in choices[1]["And"]
    assert choices[1]["Next"] == "QueueFromSettings"
    assert states["ReadQueueTimeout"]["Default"] == "BadQueueTimeout"
    parameters = states["QueueFromSettings"]["Parameters"]
    assert (parameters["seconds.$"], parameters["field"]) == (path, QUEUE_TIMEOUT)
    # A fraction (no integer test among the Choice rules) is refused by its decimal point.
    assert (
        parameters["parts.$"] == f"States.ArrayLength(States.StringSplit(States.Format('{{}}', {path}), '.'))"
    )
    assert states["QueueFromSettings"]["Next"] == "WholeSeconds"
    assert states["WholeSeconds"]["Choices"] == [
        {"Variable": "$.queue.parts", "NumericEquals": 1, "Next": "Launch"}
    ]
    assert states["WholeSeconds"]["Default"] == "BadQueueTimeout"
    # A bench job has no queue timeout: the deployment's runner.boot_seconds (1200 by default) bounds it.
    assert states["QueueFromDeployment"]["Parameters"]["seconds"] == 1200
    for source in ("QueueFromSettings", "QueueFromDeployment"):
        assert states[source]["ResultPath"] == "$.queue"
    assert states["QueueFromDeployment"]["Next"] == "Launch"
    await_runner = states["AwaitRunner"]
    assert await_runner["Resource"].endswith(":states:::aws-sdk:s3:putObject.waitForTaskToken")
    assert await_runner["TimeoutSecondsPath"] == "$.queue.seconds"
    assert "TimeoutSeconds" not in await_runner and "HeartbeatSeconds" not in await_runner
    assert await_runner["Catch"][0] == {
        "ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "TerminateAfterQueueTimeout"
    }  # fmt: skip
    assert states["TerminateAfterQueueTimeout"]["Next"] == "QueueTimeout"
    assert states["QueueTimeout"]["Error"] == "QueueTimeout"
    assert "$.queue.field, $.queue.seconds" in states["QueueTimeout"]["CausePath"]


def test_the_field_names_the_machine_reads_are_the_runners_and_the_settings() -> None:
    """The state machine reads `job.settings.queue_timeout_seconds` and marks the job message with
    `started`: the names the settings model and the runner's message parser use."""
    assert QUEUE_TIMEOUT in MatrixSettings.model_fields
    assert "settings" in MatrixJob.model_fields
    job = {"kind": "matrix", "settings": {QUEUE_TIMEOUT: 60}}
    assert JobMessage.from_wire("tok exec " + json.dumps({"job": job})).phase == "start"
    assert JobMessage.from_wire("tok exec " + json.dumps({"job": job, "started": {}})).phase == "run"


def test_launch_uses_template_tags_job_and_retries_throttling(synthesized: Synthesized) -> None:
    launch = state_machine_definition(synthesized.template_json("gco-global"))["States"]["Launch"]
    assert launch["Resource"].endswith(":states:::aws-sdk:ec2:runInstances")
    tags = launch["Parameters"]["TagSpecifications"][0]["Tags"]
    assert {"Key": "gco-runner", "Value": "gco-gpu-runner"} in tags
    retry = launch["Retry"][0]
    assert "Ec2.RequestLimitExceeded" in retry["ErrorEquals"]
    assert retry["BackoffRate"] == 2 and retry["MaxAttempts"] == 5 and retry["JitterStrategy"] == "FULL"


def test_every_path_after_launch_reaches_a_terminate_step(synthesized: Synthesized) -> None:
    definition = state_machine_definition(synthesized.template_json("gco-global"))
    states = definition["States"]
    assert states["QueueFromDeployment"]["Next"] == states["WholeSeconds"]["Choices"][0]["Next"] == "Launch"
    run_job, await_runner = states["RunJob"], states["AwaitRunner"]
    successors = [run_job["Next"], *(c["Next"] for c in run_job.get("Catch", []))]
    assert successors == ["TerminateAfterSuccess", "TerminateAfterFailure"]
    assert run_job["Catch"][0]["ErrorEquals"] == ["States.ALL"]
    successors = [await_runner["Next"], *(c["Next"] for c in await_runner.get("Catch", []))]
    assert successors == ["RunJob", "TerminateAfterQueueTimeout", "TerminateAfterFailure"]
    assert await_runner["Catch"][-1]["ErrorEquals"] == ["States.ALL"]
    assert states["TerminateAfterSuccess"]["Next"] == "Done"
    assert states["TerminateAfterFailure"]["Next"] == "RunnerFailed"
    for name in ("TerminateAfterSuccess", "TerminateAfterFailure", "TerminateAfterQueueTimeout"):
        terminate = states[name]
        assert terminate["Resource"].endswith(":states:::aws-sdk:ec2:terminateInstances")
        assert terminate["Parameters"]["InstanceIds.$"] == "$.instance.InstanceIds"
        assert terminate["Retry"][0]["ErrorEquals"] == ["States.ALL"]
        # Retries exhausted: the execution fails, and its FAILED status starts the cleanup machine.
        assert terminate["Catch"][0] == {
            "ErrorEquals": ["States.ALL"],
            "ResultPath": "$.terminateError",
            "Next": "TerminateFailed",
        }
    assert states["TerminateFailed"]["Type"] == "Fail"
    # A zone that refuses passes the launch to the next; the last one failing means no instance exists,
    # the only path that skips terminate.
    assert states["Launch"]["Catch"][0]["Next"] == "LaunchZone2"
    assert states["LaunchZone2"]["Catch"][0]["Next"] == "LaunchFailed"
    assert states["Launch"]["Next"] == states["LaunchZone2"]["Next"] == "AwaitRunner"
    assert states["LaunchZone2"]["Parameters"]["LaunchTemplate"]["LaunchTemplateName"] == "gco-runner-2"


def test_workflow_role_scoped_to_template_tags_and_own_instances(global_template: Any) -> None:
    policy = Capture()
    global_template.has_resource_properties(
        "AWS::IAM::ManagedPolicy", {"ManagedPolicyName": "gco-gpu-runner-us-east-1", "PolicyDocument": policy}
    )
    statements = {s["Sid"]: s for s in policy.as_object()["Statement"]}
    assert statements["TerminateOwnInstances"]["Condition"] == {
        "StringEquals": {"aws:ResourceTag/gco-runner": "gco-gpu-runner"}
    }
    assert statements["TagAtLaunch"]["Condition"] == {"StringEquals": {"ec2:CreateAction": "RunInstances"}}
    assert statements["LaunchFromOwnTemplate"]["Condition"] == {
        "StringEquals": {"aws:ResourceTag/gco-runner": "gco-gpu-runner"}
    }
    assert json.dumps(statements["LaunchFromOwnTemplate"]["Resource"]).endswith(':launch-template/*"]]}')
    assert statements["LaunchIntoOwnNetwork"]["Condition"] == {
        "StringEquals": {"aws:ResourceTag/gco:deployment": "gco"}
    }
    assert statements["LaunchTaggedRunner"]["Condition"] == {
        "StringEquals": {"aws:RequestTag/gco-runner": "gco-gpu-runner", "ec2:InstanceType": "g6e.xlarge"}
    }
    passed = statements["PassInstanceRole"]
    assert passed["Action"] == "iam:PassRole"
    assert passed["Condition"] == {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}
    assert json.dumps(passed["Resource"]).endswith(':role/gco-runner-us-east-1"]]}')


def test_workflow_names_what_the_runner_stack_creates(synthesized: Synthesized) -> None:
    states = state_machine_definition(synthesized.template_json("gco-global"))["States"]
    runner = synthesized.template_json("gco-runner")["Resources"]
    templates = [r for r in runner.values() if r["Type"] == "AWS::EC2::LaunchTemplate"]
    # The role is the global stack's (Regional access entries need it first); the runner stack attaches
    # its policy and instance profile to it by name.
    global_resources = synthesized.template_json("gco-global")["Resources"]
    [role] = [r for r in global_resources.values() if r["Type"] == "AWS::IAM::Role"
              and r["Properties"].get("RoleName") == "gco-runner-us-east-1"]  # fmt: skip
    assert not [r for r in runner.values() if r["Type"] == "AWS::IAM::Role"]
    [policy] = [r for r in runner.values() if r["Type"] == "AWS::IAM::ManagedPolicy"]
    [profile] = [r for r in runner.values() if r["Type"] == "AWS::IAM::InstanceProfile"]
    assert policy["Properties"]["Roles"] == profile["Properties"]["Roles"] == ["gco-runner-us-east-1"]
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}}
    ]
    assert "Policies" not in role["Properties"] and "ManagedPolicyArns" not in role["Properties"]
    for state, template in zip(("Launch", "LaunchZone2"), templates, strict=True):
        launch = states[state]
        assert launch["Parameters"]["LaunchTemplate"] == {
            "LaunchTemplateName": template["Properties"]["LaunchTemplateName"],
            "Version": "$Latest",
        }
        assert "SubnetId" not in launch["Parameters"]  # the template carries the network
    assert role["Properties"]["RoleName"] == "gco-runner-us-east-1"
    assert "Path" not in role["Properties"]  # the PassRole ARN assumes the default path


def test_global_stack_takes_nothing_from_the_runner_or_regional_stacks(synthesized: Synthesized) -> None:
    text = json.dumps(synthesized.template_json("gco-global"))
    assert "Fn::ImportValue" not in text
    # (Stack objects, not assembly artifacts: jsii would cache those artifacts under the base type.)
    assert synthesized.gco.global_stack in synthesized.gco.runner.dependencies


def test_subnets_the_runner_uses_carry_the_deployment_tag(synthesized: Synthesized) -> None:
    home = synthesized.template_json("gco-regional-us-east-1")["Resources"]
    subnets = [r for r in home.values() if r["Type"] == "AWS::EC2::Subnet"]
    assert subnets
    for subnet in subnets:
        assert {"Key": "gco:deployment", "Value": "gco"} in subnet["Properties"]["Tags"]
