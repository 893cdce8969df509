"""Runner stack: image asset, launch template, instance role, and the state machine's graph."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_cdk.assertions import Capture, Match

from tests.cdk.synth_cache import Synthesized, state_machine_definition


def test_launch_template_imdsv2_encrypted_gpu_ami(runner_template: Any, synthesized: Synthesized) -> None:
    runner_template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateName": "gco-runner",
            "LaunchTemplateData": Match.object_like(
                {
                    "InstanceType": "g6e.xlarge",
                    "MetadataOptions": Match.object_like(
                        {"HttpTokens": "required", "InstanceMetadataTags": "enabled"}
                    ),
                    "InstanceInitiatedShutdownBehavior": "terminate",
                    "BlockDeviceMappings": [
                        {
                            "DeviceName": "/dev/xvda",
                            "Ebs": Match.object_like(
                                {
                                    "Encrypted": True,
                                    "VolumeType": "gp3",
                                    "DeleteOnTermination": True,
                                }
                            ),
                        }
                    ],
                    "UserData": Match.any_value(),
                }
            ),
        },
    )
    parameters = synthesized.template_json("gco-runner")["Parameters"]
    assert any(
        "base-oss-nvidia-driver-gpu" in str(p.get("Default")) and "AWS::SSM::Parameter::Value" in p["Type"]
        for p in parameters.values()
    )


def test_user_data_pulls_runs_and_always_powers_off(synthesized: Synthesized) -> None:
    template = synthesized.template_json("gco-runner")
    template_data = next(
        r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate"
    )["Properties"]["LaunchTemplateData"]
    script = json.dumps(template_data["UserData"])
    for fragment in (
        "trap 'shutdown -h now' EXIT",
        "docker pull",
        "docker run --rm --gpus all",
        "gco-job-key",
        "X-aws-ec2-metadata-token",
        "GCO_EVIDENCE_BUCKET",
    ):
        assert fragment in script


def test_image_asset_from_the_runner_dockerfile(synthesized: Synthesized) -> None:
    manifest = json.loads((Path(synthesized.assembly.directory) / "gco-runner.assets.json").read_text())
    sources = [image["source"] for image in manifest["dockerImages"].values()]
    assert len(sources) == 1
    assert sources[0]["dockerFile"] == "gpu_runner/Dockerfile"
    assert sources[0]["platform"] == "linux/amd64"


def test_instance_role_limited_to_its_prefixes_tokens_and_table(runner_template: Any) -> None:
    policy = Capture()
    runner_template.has_resource_properties(
        "AWS::IAM::ManagedPolicy", {"ManagedPolicyName": "gco-runner-us-east-1", "PolicyDocument": policy}
    )
    statements = {s["Sid"]: s for s in policy.as_object()["Statement"]}
    assert set(statements) == {
        "ReadJobs",
        "WriteEvidenceAndRuns",
        "BucketAndTableKey",
        "AnswerOwnTasks",
        "EndpointTable",
        "PullRunnerImage",
        "EcrLogin",
    }
    assert statements["EcrLogin"]["Action"] == "ecr:GetAuthorizationToken"
    prefixes = json.dumps(statements["WriteEvidenceAndRuns"]["Resource"])
    assert "/evidence/*" in prefixes and "/runs/*" in prefixes and "/jobs/" not in prefixes
    assert "stateMachine:gco-gpu-runner" in json.dumps(statements["AnswerOwnTasks"]["Resource"])
    assert "table/gco-inference-endpoints" in json.dumps(statements["EndpointTable"]["Resource"])


def test_state_machine_named_logged_traced(runner_template: Any) -> None:
    runner_template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "StateMachineName": "gco-gpu-runner",
            "TracingConfiguration": {"Enabled": True},
            "LoggingConfiguration": Match.object_like({"Level": "ALL", "IncludeExecutionData": False}),
        },
    )


def test_run_job_waits_on_task_token_with_heartbeats(synthesized: Synthesized) -> None:
    states = state_machine_definition(synthesized.template_json("gco-runner"))["States"]
    run_job = states["RunJob"]
    assert run_job["Resource"].endswith(":states:::aws-sdk:s3:putObject.waitForTaskToken")
    assert run_job["HeartbeatSeconds"] == 300
    assert run_job["TimeoutSeconds"] == 12 * 3600
    assert run_job["Parameters"]["Body.$"].startswith("States.Format(")
    assert "$$.Task.Token, $$.Execution.Name" in run_job["Parameters"]["Body.$"]
    assert run_job["Parameters"]["Key.$"] == "States.Format('jobs/{}.json', $$.Execution.Name)"


def test_launch_uses_template_tags_job_and_retries_throttling(synthesized: Synthesized) -> None:
    launch = state_machine_definition(synthesized.template_json("gco-runner"))["States"]["Launch"]
    assert launch["Resource"].endswith(":states:::aws-sdk:ec2:runInstances")
    tags = launch["Parameters"]["TagSpecifications"][0]["Tags"]
    assert {"Key": "gco-runner", "Value": "gco-gpu-runner"} in tags
    retry = launch["Retry"][0]
    assert "Ec2.RequestLimitExceeded" in retry["ErrorEquals"]
    assert retry["BackoffRate"] == 2 and retry["MaxAttempts"] == 5 and retry["JitterStrategy"] == "FULL"


def test_every_path_after_launch_reaches_a_terminate_step(synthesized: Synthesized) -> None:
    definition = state_machine_definition(synthesized.template_json("gco-runner"))
    states = definition["States"]
    assert definition["StartAt"] == "Launch"
    run_job = states["RunJob"]
    successors = [run_job["Next"], *(c["Next"] for c in run_job.get("Catch", []))]
    assert successors == ["TerminateAfterSuccess", "TerminateAfterFailure"]
    assert run_job["Catch"][0]["ErrorEquals"] == ["States.ALL"]
    assert states["TerminateAfterSuccess"]["Next"] == "Done"
    assert states["TerminateAfterFailure"]["Next"] == "RunnerFailed"
    for name in ("TerminateAfterSuccess", "TerminateAfterFailure"):
        terminate = states[name]
        assert terminate["Resource"].endswith(":states:::aws-sdk:ec2:terminateInstances")
        assert terminate["Parameters"]["InstanceIds.$"] == "$.instance.InstanceIds"
        assert terminate["Retry"][0]["ErrorEquals"] == ["States.ALL"]
    # Launch failing means no instance exists; it is the only path that skips terminate.
    assert states["Launch"]["Catch"][0]["Next"] == "LaunchFailed"


def test_workflow_role_scoped_to_template_tags_and_own_instances(runner_template: Any) -> None:
    policy = Capture()
    runner_template.has_resource_properties(
        "AWS::IAM::ManagedPolicy", {"ManagedPolicyName": "gco-gpu-runner-us-east-1", "PolicyDocument": policy}
    )
    statements = {s["Sid"]: s for s in policy.as_object()["Statement"]}
    assert statements["TerminateOwnInstances"]["Condition"] == {
        "StringEquals": {"aws:ResourceTag/gco-runner": "gco-gpu-runner"}
    }
    assert statements["TagAtLaunch"]["Condition"] == {"StringEquals": {"ec2:CreateAction": "RunInstances"}}
    assert statements["PassInstanceRole"]["Action"] == "iam:PassRole"
