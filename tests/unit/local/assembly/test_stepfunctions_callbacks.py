"""Callback tasks (`.waitForTaskToken`) of the local Step Functions stand-in answered through its API
(gco.local.assembly.stepfunctions) by a real botocore client: SendTaskSuccess resumes the execution,
SendTaskFailure fails its task, SendTaskHeartbeat holds it until a missed heartbeat times it out, and
each operation's refusals as the API Reference names them."""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from gco import aws
from gco.local.assembly.states import StateMachine, iso_time, new_task_token
from gco.local.assembly.stepfunctions import StepFunctionsStandIn

WAIT_S = 10.0  # a bound on every wait: an answered execution ends in milliseconds
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:gco-gpu-runner"
CALLBACK: dict[str, Any] = {
    "StartAt": "RunJob",
    "States": {
        "RunJob": {
            "Type": "Task",
            "Resource": "arn:aws:states:::aws-sdk:s3:putObject.waitForTaskToken",
            "Parameters": {
                "Bucket": "evidence",
                "Key.$": "States.Format('jobs/{}.json', $$.Execution.Name)",
                "Body.$": "States.Format('{} {} {}', $$.Task.Token, $$.Execution.Id, $$.Execution.StartTime)",
            },
            "HeartbeatSeconds": 10,
            "TimeoutSeconds": 100,
            "ResultPath": "$.result",
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "RunnerFailed"}],
            "Next": "Done",
        },
        "Done": {"Type": "Succeed", "OutputPath": "$.result"},
        "RunnerFailed": {"Type": "Fail", "Error": "RunnerFailed",
                         "CausePath": "States.Format('{}: {}', $.error.Error, $.error.Cause)"},
    },
}  # fmt: skip


class Clock:
    """A clock the test moves: only the callback's timeouts read it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Runner:
    """The machine's S3 writes, as the runner would read them: (key, token, execution ARN, start time)."""

    def __init__(self) -> None:
        self.messages: queue.Queue[tuple[str, list[str]]] = queue.Queue()

    def put(self, service: str, action: str, request: Any) -> Any:
        self.messages.put((request["Key"], request["Body"].split(" ")))
        return {"ETag": '"etag"'}

    def token(self) -> str:
        _key, (token, _arn, _started) = self.messages.get(timeout=WAIT_S)
        return token


@pytest.fixture
def server() -> Iterator[StepFunctionsStandIn]:
    with StepFunctionsStandIn() as stand_in:
        yield stand_in


@pytest.fixture
def sfn(server: StepFunctionsStandIn) -> Any:
    return aws.client("stepfunctions", region="us-east-1", endpoint_url=server.url)


def hosted(server: StepFunctionsStandIn) -> tuple[Runner, Clock]:
    runner, clock = Runner(), Clock()
    server.add(MACHINE, StateMachine(CALLBACK, sdk=runner.put, clock=clock))
    return runner, clock


def error_code(raised: pytest.ExceptionInfo[ClientError]) -> str:
    return str(raised.value.response["Error"]["Code"])


def test_send_task_success_resumes_the_execution_with_its_output(
    server: StepFunctionsStandIn, sfn: Any
) -> None:
    runner, _clock = hosted(server)
    started = sfn.start_execution(stateMachineArn=MACHINE, name="run-1", input="{}")
    key, (token, execution, start_time) = runner.messages.get(timeout=WAIT_S)
    # The context object of the stand-in's execution: its ARN, its name and its start date.
    assert (key, execution) == ("jobs/run-1.json", started["executionArn"])
    assert start_time == iso_time(started["startDate"].timestamp())
    assert sfn.describe_execution(executionArn=execution)["status"] == "RUNNING"
    assert sfn.send_task_heartbeat(taskToken=token)["ResponseMetadata"]["HTTPStatusCode"] == 200
    sfn.send_task_success(taskToken=token, output=json.dumps({"evidence_id": "ev-1"}))
    ended = server.wait(execution, WAIT_S)
    assert (ended.status, ended.output, ended.visited) == (
        "SUCCEEDED",
        {"evidence_id": "ev-1"},
        ["RunJob", "Done"],
    )
    assert json.loads(sfn.describe_execution(executionArn=execution)["output"]) == {"evidence_id": "ev-1"}
    lates: list[Callable[[], object]] = [
        lambda: sfn.send_task_success(taskToken=token, output="{}"),
        lambda: sfn.send_task_heartbeat(taskToken=token),
    ]
    for late in lates:
        with pytest.raises(ClientError) as closed:
            late()
        assert error_code(closed) == "TaskTimedOut"


def test_send_task_failure_fails_the_task_which_its_catcher_takes(
    server: StepFunctionsStandIn, sfn: Any
) -> None:
    runner, _clock = hosted(server)
    execution = sfn.start_execution(stateMachineArn=MACHINE, input="{}")["executionArn"]
    sfn.send_task_failure(taskToken=runner.token(), error="RunnerJobFailed", cause='{"exit_status": 1}')
    ended = server.wait(execution, WAIT_S)
    assert (ended.status, ended.visited) == ("FAILED", ["RunJob", "RunnerFailed"])
    described = sfn.describe_execution(executionArn=execution)
    assert (described["error"], described["cause"]) == ("RunnerFailed", 'RunnerJobFailed: {"exit_status": 1}')


def test_a_failure_without_error_or_cause_has_empty_ones(server: StepFunctionsStandIn, sfn: Any) -> None:
    runner, _clock = hosted(server)
    execution = sfn.start_execution(stateMachineArn=MACHINE, input="{}")["executionArn"]
    sfn.send_task_failure(taskToken=runner.token())
    assert server.wait(execution, WAIT_S).cause == ": "


def test_heartbeats_hold_the_task_and_a_missed_one_times_it_out(
    server: StepFunctionsStandIn, sfn: Any
) -> None:
    runner, clock = hosted(server)
    execution = sfn.start_execution(stateMachineArn=MACHINE, input="{}")["executionArn"]
    token = runner.token()
    for _ in range(3):
        clock.now += 9
        sfn.send_task_heartbeat(taskToken=token)
    time.sleep(0.2)  # the wait reads the clock every CLOCK_POLL_S: it would have seen a lapse by now
    assert sfn.describe_execution(executionArn=execution)["status"] == "RUNNING"
    clock.now += 10
    ended = server.wait(execution, WAIT_S)
    assert (ended.error, ended.cause) == (
        "RunnerFailed",
        "States.Timeout: no heartbeat came within 10 s (HeartbeatSeconds)",
    )
    with pytest.raises(ClientError) as late:
        sfn.send_task_heartbeat(taskToken=token)
    assert error_code(late) == "TaskTimedOut"  # the runner's heartbeat learns its task is gone


def test_a_token_not_given_or_malformed_and_an_output_not_json_are_refused(
    server: StepFunctionsStandIn, sfn: Any
) -> None:
    runner, _clock = hosted(server)
    execution = sfn.start_execution(stateMachineArn=MACHINE, input="{}")["executionArn"]
    token = runner.token()
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: sfn.send_task_success(taskToken="not a token", output="{}"), "InvalidToken"),
        (lambda: sfn.send_task_heartbeat(taskToken=new_task_token()), "TaskDoesNotExist"),
        (lambda: sfn.send_task_failure(taskToken=new_task_token(), error="E"), "TaskDoesNotExist"),
        (lambda: sfn.send_task_success(taskToken=token, output="{not json"), "InvalidOutput"),
        (lambda: sfn.send_task_failure(taskToken=token, error="E" * 257), "ValidationException"),
    ]
    for call, code in cases:
        with pytest.raises(ClientError) as refused:
            call()
        assert error_code(refused) == code
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    sfn.send_task_success(taskToken=token, output="{}")  # none of those closed the task
    assert server.wait(execution, WAIT_S).status == "SUCCEEDED"


def test_a_token_longer_than_the_api_allows_is_a_validation_error(server: StepFunctionsStandIn) -> None:
    signed = {
        "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": "AWSStepFunctions.SendTaskHeartbeat",
        "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20240101/us-east-1/states/aws4_request",
    }
    for token, code in (("t" * 2049, "ValidationException"), ("", "ValidationException")):
        answer = httpx.post(
            server.url, headers=signed, content=json.dumps({"taskToken": token}), timeout=WAIT_S
        )
        assert (answer.status_code, answer.json()["__type"]) == (400, code)


def test_a_replaced_machine_s_waiting_task_is_still_answered(server: StepFunctionsStandIn, sfn: Any) -> None:
    runner, _clock = hosted(server)
    execution = sfn.start_execution(stateMachineArn=MACHINE, input="{}")["executionArn"]
    token = runner.token()
    hosted(server)  # the ARN now names another machine; the running execution is the first's
    sfn.send_task_success(taskToken=token, output='{"done": true}')
    assert server.wait(execution, WAIT_S).output == {"done": True}
