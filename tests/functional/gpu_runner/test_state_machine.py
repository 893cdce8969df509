"""The runner state machines as synthesized, executed by moto's Step Functions interpreter.

Launch runs an instance from a launch template on moto EC2, AwaitRunner writes the start message
and waits at most the queue timeout for the runner to answer it, RunJob writes the job with its task
token to S3 and waits, the runner (with a stand-in for `gco bench rounds`) answers, and every run -
success, runner failure, queue timeout, heartbeat timeout, abort (through the cleanup machine) - ends
with the instance terminated.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gco.local.moto.motoserver import MotoServer
from gpu_runner.job import JobMessage, MatrixJob
from gpu_runner.runner import RunnerError, read_job, run_job
from gpu_runner.start import start
from tests.cdk.synth_cache import runner_definition
from tests.conftest import SYNTH_GROUP
from tests.functional.gpu_runner.conftest import BUCKET, RUNNER, FakeRounds, clients, make_bucket, rounds_job

# It reads the synthesized app: on the worker that synthesizes it for the CDK tests.
pytestmark = pytest.mark.xdist_group(SYNTH_GROUP)

ROLE = "arn:aws:iam::123456789012:role/gco-gpu-runner"


TEMPLATES = ("gco-runner", "gco-runner-2")


def _deploy(
    aws: dict[str, Any],
    heartbeat_seconds: int | None = None,
    templates: tuple[str, ...] = TEMPLATES,
    edit: Any = None,
) -> str:
    ec2, sfn = aws["ec2"], aws["stepfunctions"]
    make_bucket(aws["s3"])
    image = ec2.describe_images()["Images"][0]["ImageId"]
    # What the runner stack deploys after the global stack: one template per zone, each in its subnet
    # (`templates` leaves some out: a zone whose launch EC2 refuses).
    subnets = [s["SubnetId"] for s in ec2.describe_subnets()["Subnets"]]
    for index, name in enumerate(TEMPLATES):
        if name in templates:
            ec2.create_launch_template(
                LaunchTemplateName=name,
                LaunchTemplateData={
                    "ImageId": image,
                    "InstanceType": "g6e.xlarge",
                    "NetworkInterfaces": [{"DeviceIndex": 0, "SubnetId": subnets[index]}],
                },
            )
    definition = runner_definition({"Partition": "aws", "EvidenceBucket": BUCKET})
    if heartbeat_seconds is not None:
        definition["States"]["RunJob"]["HeartbeatSeconds"] = heartbeat_seconds
    if edit is not None:
        edit(definition["States"])
    return str(
        sfn.create_state_machine(name="gco-gpu-runner", definition=json.dumps(definition), roleArn=ROLE)[
            "stateMachineArn"
        ]
    )


def _wait_for_job(s3: Any, key: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return read_job(s3, BUCKET, key)
        except RunnerError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _runner_up(aws: dict[str, Any], key: str, execution: str) -> JobMessage:
    """What the runner does when its instance is up: answer the start message, read the job message.

    Then it waits for moto to wait on the task token, which in AWS is the case once the job message
    exists. moto's interpreter (moto 5.2, `state_task_service_callback.py`) puts the message in S3
    first, then records `TaskSubmitted` and only after that sets up the token's heartbeat endpoint
    (`_after_eval_execution` -> `_eval_integration_pattern` -> `setup_heartbeat_endpoint`); a
    heartbeat in between is answered `InvalidToken` (`callback.py` `notify_heartbeat` returns False),
    which the runner rightly takes as final. On a fast machine the runner's first heartbeat landed
    there (a CI run: "heartbeat refused (InvalidToken): stopping the job").
    """
    sfn = aws["stepfunctions"]
    message = start(aws["s3"], sfn, BUCKET, key, runner=RUNNER, wait=30.0, poll=0.1)
    assert message is not None and message.phase == "run"
    deadline = time.monotonic() + 30.0
    while _submitted(sfn, execution) < 2:  # the start message's task, then the job's
        assert time.monotonic() < deadline, f"{execution}: moto never waited on the job's token"
        time.sleep(0.05)
    time.sleep(0.05)  # `TaskSubmitted` is recorded a few statements before the endpoint is set up
    return message


def _submitted(sfn: Any, execution: str) -> int:
    history = sfn.get_execution_history(executionArn=execution)["events"]
    return sum(1 for event in history if event["type"] == "TaskSubmitted")


def _finish(sfn: Any, execution_arn: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING":
            return described
        time.sleep(0.2)
    raise AssertionError("execution still running")


def _instance_states(ec2: Any) -> list[str]:
    return [i["State"]["Name"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]


def _cleanup(sfn: Any, execution: str, name: str, status: str, run: str) -> dict[str, Any]:
    """Run the cleanup machine on the status-change event EventBridge delivers for `execution`."""
    try:
        cleanup = sfn.create_state_machine(
            name="gco-gpu-runner-cleanup",
            definition=json.dumps(runner_definition({"Partition": "aws"}, name="gco-gpu-runner-cleanup")),
            roleArn=ROLE,
        )["stateMachineArn"]
    except sfn.exceptions.StateMachineAlreadyExists:
        cleanup = next(
            m["stateMachineArn"]
            for m in sfn.list_state_machines()["stateMachines"]
            if m["name"] == "gco-gpu-runner-cleanup"
        )
    event = {
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "detail": {"name": name, "status": status, "executionArn": execution},
    }
    started = sfn.start_execution(stateMachineArn=cleanup, name=run, input=json.dumps(event))["executionArn"]
    return _finish(sfn, started)


def _start(aws: dict[str, Any], machine: str, name: str) -> str:
    return str(
        aws["stepfunctions"].start_execution(
            stateMachineArn=machine, name=name, input=json.dumps({"job": rounds_job()})
        )["executionArn"]
    )


def test_success_ends_with_evidence_named_and_instance_terminated(
    sfn_moto: MotoServer, tmp_path: Path
) -> None:
    aws = clients(sfn_moto)
    execution = _start(aws, _deploy(aws), "bench-ok")
    message = _runner_up(aws, "jobs/bench-ok.json", execution)
    assert message.execution == "bench-ok" and message.instance_ids[0].startswith("i-")
    assert _instance_states(aws["ec2"]) == ["running"]
    instance = aws["ec2"].describe_instances()["Reservations"][0]["Instances"][0]
    assert {"Key": "gco-job-key", "Value": "jobs/bench-ok.json"} in instance["Tags"]
    assert instance["InstanceType"] == "g6e.xlarge"  # from the template the workflow names
    outcome = run_job(
        message,
        sfn=aws["stepfunctions"],
        s3=aws["s3"],
        bucket=BUCKET,
        workdir=tmp_path,
        runner=RUNNER,
        execute=FakeRounds(),
    )
    assert outcome.succeeded
    described = _finish(aws["stepfunctions"], execution)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"])["evidence"] == f"s3://{BUCKET}/evidence/sha256-abc.json"
    assert _instance_states(aws["ec2"]) == ["terminated"]


def test_the_machine_accepts_a_matrix_job(sfn_moto: MotoServer, tmp_path: Path) -> None:
    """The job kinds are the runner's: the machine hands a `matrix` job over as it does a bench job."""
    aws = clients(sfn_moto)
    job = {"kind": "matrix", "settings": {"selected_region": "us-east-1", "queue_timeout_seconds": 60}}
    execution = aws["stepfunctions"].start_execution(
        stateMachineArn=_deploy(aws), name="matrix-ok", input=json.dumps({"job": job})
    )["executionArn"]
    message = _runner_up(aws, "jobs/matrix-ok.json", execution)
    assert isinstance(message.job, MatrixJob) and message.job.settings == job["settings"]
    fake = FakeRounds()
    outcome = run_job(
        message,
        sfn=aws["stepfunctions"],
        s3=aws["s3"],
        bucket=BUCKET,
        workdir=tmp_path,
        runner=RUNNER,
        execute=fake,
    )
    assert outcome.succeeded and fake.argv[:3] == ["gco", "matrix", "run"]
    described = _finish(aws["stepfunctions"], execution)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"])["kind"] == "matrix"
    assert _instance_states(aws["ec2"]) == ["terminated"]
    assert "QueueFromSettings" in _entered(aws["stepfunctions"], execution)


def _entered(sfn: Any, execution: str) -> list[str]:
    history = sfn.get_execution_history(executionArn=execution)["events"]
    return [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]


def _matrix(aws: dict[str, Any], machine: str, name: str, queue_timeout: object) -> str:
    job = {
        "kind": "matrix",
        "settings": {"selected_region": "us-east-1", "queue_timeout_seconds": queue_timeout},
    }
    return str(
        aws["stepfunctions"].start_execution(
            stateMachineArn=machine, name=name, input=json.dumps({"job": job})
        )["executionArn"]
    )


def test_no_runner_up_within_the_queue_timeout_fails_naming_it_and_terminates(
    sfn_moto: MotoServer, tmp_path: Path
) -> None:
    """The instance started but its runner never answered (no capacity behind it, a boot that hangs)."""
    aws = clients(sfn_moto)
    execution = _matrix(aws, _deploy(aws), "matrix-queued", queue_timeout=1)
    first = _wait_for_job(aws["s3"], "jobs/matrix-queued.json")
    assert first.phase == "start" and _instance_states(aws["ec2"]) == ["running"]
    described = _finish(aws["stepfunctions"], execution)  # nobody answers the start message
    assert (described["status"], described.get("error")) == ("FAILED", "QueueTimeout")
    assert described["cause"].startswith("no runner was up within queue_timeout_seconds (1 s) of its launch")
    assert _entered(aws["stepfunctions"], execution)[-2:] == ["TerminateAfterQueueTimeout", "QueueTimeout"]
    assert _instance_states(aws["ec2"]) == ["terminated"]
    # A runner that comes up late is refused: it runs nothing, so it deploys nothing to destroy.
    late = start(aws["s3"], aws["stepfunctions"], BUCKET, "jobs/matrix-queued.json", runner=RUNNER, wait=1.0,
                 poll=0.1)  # fmt: skip
    assert late is None
    assert _wait_for_job(aws["s3"], "jobs/matrix-queued.json").phase == "start"  # no job message followed


@pytest.mark.parametrize("queue_timeout", ["soon", 0, 90.5, 100_000_000, None])
def test_a_bad_queue_timeout_is_refused_before_any_instance(
    sfn_moto: MotoServer, queue_timeout: object
) -> None:
    aws = clients(sfn_moto)
    described = _finish(aws["stepfunctions"], _matrix(aws, _deploy(aws), "matrix-bad", queue_timeout))
    assert (described["status"], described.get("error")) == ("FAILED", "BadQueueTimeout")
    assert "job.settings.queue_timeout_seconds must be a whole number of seconds" in described["cause"]
    assert _instance_states(aws["ec2"]) == []


def test_runner_failure_fails_the_execution_and_terminates(sfn_moto: MotoServer, tmp_path: Path) -> None:
    aws = clients(sfn_moto)
    execution = _start(aws, _deploy(aws), "bench-fails")
    message = _runner_up(aws, "jobs/bench-fails.json", execution)
    run_job(
        message,
        sfn=aws["stepfunctions"],
        s3=aws["s3"],
        bucket=BUCKET,
        workdir=tmp_path,
        runner=RUNNER,
        execute=FakeRounds("fail"),
    )
    described = _finish(aws["stepfunctions"], execution)
    assert described["status"] == "FAILED"
    assert described.get("error") == "RunnerFailed"
    assert described["cause"].startswith("RunnerJobFailed: ")
    # moto's SendTaskFailure keeps the error name but drops the cause (the runner's JSON); the unit
    # test of the runner checks the cause it sends.
    assert _instance_states(aws["ec2"]) == ["terminated"]


@pytest.mark.parametrize("heartbeat_seconds", [1])
def test_heartbeat_timeout_terminates_and_the_runner_stops(
    sfn_moto: MotoServer, tmp_path: Path, heartbeat_seconds: int
) -> None:
    aws = clients(sfn_moto)
    execution = _start(aws, _deploy(aws, heartbeat_seconds), "bench-silent")
    message = _runner_up(aws, "jobs/bench-silent.json", execution)
    described = _finish(aws["stepfunctions"], execution)  # no heartbeat is sent
    assert described["status"] == "FAILED"
    assert described.get("error") == "RunnerFailed"
    assert described["cause"].startswith(("States.HeartbeatTimeout", "States.Timeout"))  # moto says Timeout
    assert _instance_states(aws["ec2"]) == ["terminated"]
    # A runner that wakes up late is refused at its first heartbeat and stops its job.
    fake = FakeRounds("hang")
    outcome = run_job(
        message,
        sfn=aws["stepfunctions"],
        s3=aws["s3"],
        bucket=BUCKET,
        workdir=tmp_path,
        runner=RUNNER,
        execute=fake,
        heartbeat_interval=0.05,
    )
    assert outcome.cancelled
    assert threading.active_count() >= 1


def test_abort_is_cleaned_up_by_the_cleanup_machine(sfn_moto: MotoServer) -> None:
    aws = clients(sfn_moto)
    sfn = aws["stepfunctions"]
    execution = _start(aws, _deploy(aws), "bench-aborted")
    _wait_for_job(aws["s3"], "jobs/bench-aborted.json")
    sfn.stop_execution(executionArn=execution, error="Operator", cause="stopped by hand")
    # No state of an aborted execution runs (moto's interpreter may still list it as RUNNING).
    assert sfn.describe_execution(executionArn=execution)["status"] in ("ABORTED", "RUNNING")
    assert _instance_states(aws["ec2"]) == ["running"]
    assert _cleanup(sfn, execution, "bench-aborted", "ABORTED", "clean-1")["status"] == "SUCCEEDED"
    assert _instance_states(aws["ec2"]) == ["terminated"]
    # Nothing left to clean: a second delivery of the event succeeds without terminating anything.
    assert _cleanup(sfn, execution, "bench-aborted", "ABORTED", "clean-2")["status"] == "SUCCEEDED"


class SpySfn:
    """The moto Step Functions client, with the order of heartbeats and the job's output recorded."""

    def __init__(self, client: Any, events: list[str]) -> None:
        self.client, self.events = client, events

    def send_task_heartbeat(self, **kwargs: Any) -> Any:
        self.events.append("heartbeat")
        return self.client.send_task_heartbeat(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_the_first_heartbeat_goes_before_the_jobs_first_output(sfn_moto: MotoServer, tmp_path: Path) -> None:
    aws = clients(sfn_moto)
    execution = _start(aws, _deploy(aws), "bench-beat")
    message = _runner_up(aws, "jobs/bench-beat.json", execution)
    events: list[str] = []
    fake = FakeRounds()

    def execute(argv: list[str], cancel: threading.Event) -> tuple[int, str, str]:
        events.append("output")
        return fake(argv, cancel)

    outcome = run_job(
        message, sfn=SpySfn(aws["stepfunctions"], events), s3=aws["s3"], bucket=BUCKET, workdir=tmp_path,
        runner=RUNNER, execute=execute, heartbeat_interval=3600,
    )  # fmt: skip
    assert outcome.succeeded
    assert events == ["heartbeat", "output"]  # accepted by moto: the task was open
    assert _finish(aws["stepfunctions"], execution)["status"] == "SUCCEEDED"
    assert _instance_states(aws["ec2"]) == ["terminated"]


def test_a_zone_that_refuses_the_launch_passes_it_to_the_next(sfn_moto: MotoServer, tmp_path: Path) -> None:
    aws = clients(sfn_moto)
    # The first zone's launch is refused (here: its template does not exist); the second zone launches.
    execution = _start(aws, _deploy(aws, templates=("gco-runner-2",)), "bench-zone2")
    message = _runner_up(aws, "jobs/bench-zone2.json", execution)
    (instance,) = [i for r in aws["ec2"].describe_instances()["Reservations"] for i in r["Instances"]]
    (zone2,) = aws["ec2"].describe_launch_templates(LaunchTemplateNames=["gco-runner-2"])["LaunchTemplates"]
    assert {"Key": "aws:ec2launchtemplate:id", "Value": zone2["LaunchTemplateId"]} in instance["Tags"]
    entered = _entered(aws["stepfunctions"], execution)
    # A bench job sets no queue timeout: the deployment's boot allowance bounds the wait for the runner.
    assert entered[:6] == [
        "ReadQueueTimeout", "QueueFromDeployment", "Launch", "LaunchZone2", "AwaitRunner", "RunJob"
    ]  # fmt: skip
    run_job(
        message,
        sfn=aws["stepfunctions"],
        s3=aws["s3"],
        bucket=BUCKET,
        workdir=tmp_path,
        runner=RUNNER,
        execute=FakeRounds(),
    )
    assert _finish(aws["stepfunctions"], execution)["status"] == "SUCCEEDED"
    assert _instance_states(aws["ec2"]) == ["terminated"]


def test_no_zone_can_launch_fails_without_an_instance(sfn_moto: MotoServer) -> None:
    aws = clients(sfn_moto)
    described = _finish(aws["stepfunctions"], _start(aws, _deploy(aws, templates=()), "bench-nowhere"))
    assert (described["status"], described.get("error")) == ("FAILED", "LaunchFailed")
    assert _instance_states(aws["ec2"]) == []


def _terminate_refused(states: dict[str, Any]) -> None:
    """Terminate asks EC2 for an instance it does not know (refused every time), with short retries."""
    for name in ("TerminateAfterSuccess", "TerminateAfterFailure"):
        parameters = states[name]["Parameters"]
        parameters.pop("InstanceIds.$")
        parameters["InstanceIds"] = ["i-0000000000000dead"]
        states[name]["Retry"][0].update({"IntervalSeconds": 1, "MaxAttempts": 1})


def test_an_exhausted_terminate_fails_the_run_and_the_cleanup_terminates(
    sfn_moto: MotoServer, tmp_path: Path
) -> None:
    aws = clients(sfn_moto)
    sfn = aws["stepfunctions"]
    execution = _start(aws, _deploy(aws, edit=_terminate_refused), "bench-stuck")
    message = _runner_up(aws, "jobs/bench-stuck.json", execution)
    run_job(
        message, sfn=sfn, s3=aws["s3"], bucket=BUCKET, workdir=tmp_path, runner=RUNNER, execute=FakeRounds()
    )
    described = _finish(sfn, execution)
    assert (described["status"], described.get("error")) == ("FAILED", "TerminateFailed")
    assert _instance_states(aws["ec2"]) == ["running"]
    # The FAILED status change starts the cleanup machine, which finds the instance by its job tag.
    assert _cleanup(sfn, execution, "bench-stuck", "FAILED", "clean-stuck")["status"] == "SUCCEEDED"
    assert _instance_states(aws["ec2"]) == ["terminated"]
