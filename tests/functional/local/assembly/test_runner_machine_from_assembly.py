"""The GPU runner's state machine run from its synthesized definition by the local Step Functions
stand-in (gco.local.assembly.states and stepfunctions), its AWS SDK tasks calling the moto server, and
the test acting as the runner with the runner's own code (gpu_runner.start and gpu_runner.runner)
over the stand-in's API.

What the definition says, followed through: Launch starts an instance from the runner stack's launch
template (made in moto from the synthesized template), tagged with the job's key; AwaitRunner writes
the start message (with its task token) to that key and waits; the runner answers it, RunJob writes the
job message (a new token) and waits on the runner's heartbeats; then the runner's success, or its
failure, or nobody answering within the queue timeout, passes through a terminate step (the instance
terminated in moto) to the end the definition gives it.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gco import aws
from gco.local.assembly.resolve import ACCOUNT, Resolver
from gco.local.assembly.states import BotocoreSdk, Execution, StateMachine
from gco.local.assembly.stepfunctions import StepFunctionsStandIn
from gco.local.moto.motoserver import MotoServer
from gpu_runner.job import JobMessage
from gpu_runner.runner import Outcome, read_job, run_job
from gpu_runner.start import announce, start
from tests.cdk.synth_cache import HOME, runner_definition, synthesize
from tests.conftest import SYNTH_GROUP

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(SYNTH_GROUP)]
BUCKET = "gco-local-evidence"
MACHINE = f"arn:aws:states:{HOME}:{ACCOUNT}:stateMachine:gco-gpu-runner"
WAIT_S = 30.0  # a bound on every wait: each path ends in well under a second once answered
POLL_S = 0.05  # how often the runner reads its key, and sends heartbeats


@dataclass
class Stack:
    """The moto server's clients, the stand-in with the runner machine, and the launch templates'
    user data as the runner stack gives it (resolved)."""

    ec2: Any
    s3: Any
    sfn: Any
    stand_in: StepFunctionsStandIn
    user_data: str

    def start(self, name: str, job: dict[str, Any]) -> str:
        started = self.sfn.start_execution(stateMachineArn=MACHINE, name=name, input=json.dumps({"job": job}))
        return str(started["executionArn"])

    def instance(self, key: str) -> dict[str, Any]:
        """The one instance tagged with the job key `key`."""
        filters = [{"Name": "tag:gco-job-key", "Values": [key]}]
        reservations = self.ec2.describe_instances(Filters=filters)["Reservations"]
        [instance] = [instance for reservation in reservations for instance in reservation["Instances"]]
        return dict(instance)


def imports(value: Any) -> Iterator[str]:
    """The export names a template value imports (`Fn::ImportValue`)."""
    if isinstance(value, dict):
        if "Fn::ImportValue" in value:
            yield str(value["Fn::ImportValue"])
        for item in value.values():
            yield from imports(item)
    elif isinstance(value, list):
        for item in value:
            yield from imports(item)


def encoded(value: Any, resolver: Resolver) -> Any:
    """`value` with each `Fn::Base64` evaluated (the resolver leaves it to its caller)."""
    if isinstance(value, dict):
        if set(value) == {"Fn::Base64"}:
            return base64.b64encode(str(resolver.resolve(value["Fn::Base64"])).encode()).decode()
        return {key: encoded(item, resolver) for key, item in value.items()}
    if isinstance(value, list):
        return [encoded(item, resolver) for item in value]
    return value


def launch_templates(ec2: Any, iam: Any) -> str:
    """The runner stack's launch templates made in moto, what they name made first (a VPC, one subnet
    per template, the security group, the instance profile, the image); the user data they give."""
    runner = synthesize().template_json("gco-runner")
    templates = [
        r["Properties"] for r in runner["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate"
    ]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{n}.0/24")["Subnet"]["SubnetId"] for n in (1, 2)]
    group = ec2.create_security_group(GroupName="gco-runner", Description="runner", VpcId=vpc)["GroupId"]
    profile = iam.create_instance_profile(InstanceProfileName=f"gco-runner-{HOME}")["InstanceProfile"]["Arn"]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    exports = {name: subnets[0] if "Subnet1" in name else subnets[1] if "Subnet2" in name else BUCKET
               for name in imports(templates)}  # fmt: skip
    resolver = Resolver(
        region=HOME,
        stack="gco-runner",
        refs={name: image for name, p in runner["Parameters"].items() if "Image::Id" in p["Type"]},
        attributes={
            **{
                (i, "Arn"): profile
                for i, r in runner["Resources"].items()
                if r["Type"] == "AWS::IAM::InstanceProfile"
            },
            **{
                (i, "GroupId"): group
                for i, r in runner["Resources"].items()
                if r["Type"] == "AWS::EC2::SecurityGroup"
            },
        },
        exports=exports,
    )
    for template in templates:
        data = resolver.resolve(encoded(template["LaunchTemplateData"], resolver))
        ec2.create_launch_template(LaunchTemplateName=template["LaunchTemplateName"], LaunchTemplateData=data)
    return base64.b64decode(data["UserData"]).decode()


@pytest.fixture
def stack(moto: MotoServer) -> Iterator[Stack]:
    definition = runner_definition({"Partition": "aws", "EvidenceBucket": BUCKET})
    assert "TOKEN" not in json.dumps(definition)  # every CloudFormation token substituted
    clients = {
        service: aws.client(service, region=HOME, endpoint_url=moto.url) for service in ("ec2", "s3", "iam")
    }
    user_data = launch_templates(clients["ec2"], clients["iam"])
    clients["s3"].create_bucket(Bucket=BUCKET)
    with StepFunctionsStandIn() as stand_in:
        stand_in.add(MACHINE, StateMachine(definition, sdk=BotocoreSdk(clients.__getitem__)))
        sfn = aws.client("stepfunctions", region=HOME, endpoint_url=stand_in.url)
        yield Stack(clients["ec2"], clients["s3"], sfn, stand_in, user_data)


def job_run(rc: int, stdout: str, stderr: str) -> Any:
    """The runner's job command, stood in: it runs a while (heartbeats go out) and exits `rc`."""

    def execute(argv: list[str], cancel: threading.Event) -> tuple[int, str, str]:
        time.sleep(10 * POLL_S)
        return rc, stdout, stderr

    return execute


def run_as_runner(stack: Stack, message: JobMessage, workdir: Path, execute: Any) -> Outcome:
    """The runner's `run_job` of `message`: heartbeats every `POLL_S`, no engines to sweep."""
    return run_job(message, sfn=stack.sfn, s3=stack.s3, bucket=BUCKET, workdir=workdir, runner="runner-1",
                   execute=execute, heartbeat_interval=POLL_S, sweep_engines=list)  # fmt: skip


def heartbeats(sfn: Any) -> list[int]:
    """The HTTP status of each SendTaskHeartbeat the client gets an answer to, as they come."""
    statuses: list[int] = []

    def answered(http_response: Any, model: Any, **_: Any) -> None:
        if model.name == "SendTaskHeartbeat":
            statuses.append(http_response.status_code)

    sfn.meta.events.register("after-call.sfn.SendTaskHeartbeat", answered)
    return statuses


def test_a_job_runs_on_a_launched_instance_which_is_terminated_after_its_success(
    stack: Stack, tmp_path: Path
) -> None:
    job = {"kind": "matrix", "settings": {"queue_timeout_seconds": 600}}
    execution = stack.start("run-ok", job)
    key = "jobs/run-ok.json"
    message = start(stack.s3, stack.sfn, BUCKET, key, runner="runner-1", wait=WAIT_S, poll=POLL_S)
    assert message is not None and (message.phase, message.execution) == ("run", "run-ok")
    instance = stack.instance(key)
    assert message.instance_ids == [instance["InstanceId"]]  # Launch's ResultSelector, in the job message
    tags = {tag["Key"]: tag["Value"] for tag in instance["Tags"]}
    assert (tags["gco-runner"], tags["gco:deployment"], tags["Name"]) == (
        "gco-gpu-runner",
        "gco",
        "gco-runner/LaunchTemplate",
    )
    assert (instance["InstanceType"], instance["State"]["Name"]) == ("g6e.xlarge", "running")
    user_data = stack.ec2.describe_instance_attribute(InstanceId=instance["InstanceId"], Attribute="userData")
    assert base64.b64decode(user_data["UserData"]["Value"]).decode() == stack.user_data
    assert f"GCO_EVIDENCE_BUCKET={BUCKET}" in stack.user_data
    assert stack.s3.head_object(Bucket=BUCKET, Key=key)["ContentType"] == "text/plain"
    beats = heartbeats(stack.sfn)
    summary = json.dumps({"evidence_id": "ev-1", "summary": {"line": "2 of 2 cells passed"}})
    outcome = run_as_runner(stack, message, tmp_path, job_run(0, summary, ""))
    ended = stack.stand_in.wait(execution, WAIT_S)
    assert (ended.status, ended.output) == ("SUCCEEDED", outcome.output), ended
    assert ended.output["evidence"] == f"s3://{BUCKET}/evidence/ev-1.json"
    assert ended.visited == ["ReadQueueTimeout", "QueueFromSettings", "WholeSeconds", "Launch", "AwaitRunner",
                             "RunJob", "TerminateAfterSuccess", "Done"]  # fmt: skip
    assert len(beats) >= 2 and set(beats) == {200}  # the stand-in took the runner's heartbeats
    assert stack.instance(key)["State"]["Name"] == "terminated"


def test_the_runner_s_failure_terminates_the_instance_and_fails_the_execution(
    stack: Stack, tmp_path: Path
) -> None:
    job = {"kind": "bench-rounds", "manifest": {"name": "m"}, "prompts": ["hello"]}  # no queue timeout
    execution = stack.start("run-bad", job)
    key = "jobs/run-bad.json"
    message = start(stack.s3, stack.sfn, BUCKET, key, runner="runner-1", wait=WAIT_S, poll=POLL_S)
    assert message is not None
    outcome = run_as_runner(stack, message, tmp_path, job_run(1, "", "RuntimeError: the engine crashed"))
    ended = stack.stand_in.wait(execution, WAIT_S)
    assert (ended.status, ended.error) == ("FAILED", "RunnerFailed"), ended
    assert ended.cause == f"RunnerJobFailed: {json.dumps(outcome.output)}"
    assert outcome.output["message"] == "RuntimeError: the engine crashed"
    assert ended.visited == ["ReadQueueTimeout", "QueueFromDeployment", "Launch", "AwaitRunner", "RunJob",
                             "TerminateAfterFailure", "RunnerFailed"]  # fmt: skip
    assert stack.instance(key)["State"]["Name"] == "terminated"
    described = stack.sfn.describe_execution(executionArn=execution)
    assert (described["status"], described["error"]) == ("FAILED", "RunnerFailed")


def test_no_runner_within_the_queue_timeout_terminates_the_instance_and_refuses_the_late_one(
    stack: Stack,
) -> None:
    job = {"kind": "matrix", "settings": {"queue_timeout_seconds": 1}}
    execution = stack.start("run-late", job)
    ended: Execution = stack.stand_in.wait(execution, WAIT_S)  # nobody answers: 1 s passes
    assert (ended.status, ended.error) == ("FAILED", "QueueTimeout"), ended
    assert ended.cause is not None and ended.cause.startswith(
        "no runner was up within queue_timeout_seconds (1 s)"
    )
    assert ended.visited == ["ReadQueueTimeout", "QueueFromSettings", "WholeSeconds", "Launch", "AwaitRunner",
                             "TerminateAfterQueueTimeout", "QueueTimeout"]  # fmt: skip
    key = "jobs/run-late.json"
    assert stack.instance(key)["State"]["Name"] == "terminated"
    late = read_job(stack.s3, BUCKET, key)  # the start message, still at the key
    assert late.phase == "start"
    assert announce(late, sfn=stack.sfn, runner="runner-late") is False  # TaskTimedOut: nothing may run
