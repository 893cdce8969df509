"""Step Functions' API stood in (gco.local.assembly.stepfunctions), called by a real botocore client:
executions of small in-test definitions started, waited on, described and listed; StartExecution's
idempotence and its refusals; an unsigned request refused."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from gco import aws
from gco.errors import GcoInputError
from gco.local.assembly.states import StateMachine
from gco.local.assembly.stepfunctions import StepFunctionsStandIn, execution_arn
from gco.local.errors import ExecutionWaitError, FunctionInvokeError

WAIT_S = 10.0  # a bound on every wait: an execution of these definitions ends in milliseconds
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:gco-test"
FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:work"
WORK: dict[str, Any] = {
    "StartAt": "Init",
    "States": {
        "Init": {"Type": "Pass", "Result": "started", "ResultPath": "$.phase", "Next": "Work"},
        "Work": {
            "Type": "Task",
            "Resource": FUNCTION,
            "Parameters": {"n.$": "$.n"},
            "ResultPath": "$.result",
            "Next": "Done",
        },
        "Done": {"Type": "Succeed", "OutputPath": "$.result"},
    },
}
REFUSED: dict[str, Any] = {
    "StartAt": "Check",
    "States": {
        "Check": {"Type": "Pass", "Next": "No"},
        "No": {"Type": "Fail", "Error": "NotGood", "Cause": "the check said no"},
    },
}
UNMODELLED: dict[str, Any] = {"StartAt": "Fan", "States": {"Fan": {"Type": "Parallel", "Branches": []}}}


def doubled(calls: list[tuple[str, Any]]) -> Callable[[str, Any], Any]:
    """A task's invoke that records its call and answers twice the payload's `n`."""

    def invoke(arn: str, payload: Any) -> Any:
        calls.append((arn, payload))
        return {"doubled": payload["n"] * 2}

    return invoke


@pytest.fixture
def server() -> Iterator[StepFunctionsStandIn]:
    with StepFunctionsStandIn() as stand_in:
        yield stand_in


@pytest.fixture
def sfn(server: StepFunctionsStandIn) -> Any:
    return aws.client("stepfunctions", region="us-east-1", endpoint_url=server.url)


def error_code(raised: pytest.ExceptionInfo[ClientError]) -> str:
    return str(raised.value.response["Error"]["Code"])


def test_an_execution_runs_its_task_and_is_described_with_its_output(
    server: StepFunctionsStandIn, sfn: Any
) -> None:
    calls: list[tuple[str, Any]] = []
    server.add(MACHINE, StateMachine(WORK, doubled(calls)))
    started = sfn.start_execution(stateMachineArn=MACHINE, name="run-1", input='{"n": 21}')
    assert started["executionArn"] == "arn:aws:states:us-east-1:123456789012:execution:gco-test:run-1"
    ended = server.wait(started["executionArn"], WAIT_S)
    assert (ended.status, ended.output, ended.visited) == (
        "SUCCEEDED",
        {"doubled": 42},
        ["Init", "Work", "Done"],
    )
    assert calls == [(FUNCTION, {"n": 21})]
    described = sfn.describe_execution(executionArn=started["executionArn"])
    assert (described["status"], described["name"], described["stateMachineArn"]) == (
        "SUCCEEDED",
        "run-1",
        MACHINE,
    )
    assert json.loads(described["output"]) == {"doubled": 42} and described["input"] == '{"n": 21}'
    assert described["startDate"] == started["startDate"] <= described["stopDate"]
    assert "error" not in described and "cause" not in described


def test_a_start_without_a_name_or_an_input_gets_a_uuid_and_an_empty_object(
    server: StepFunctionsStandIn, sfn: Any
) -> None:
    server.add(MACHINE, StateMachine(REFUSED, doubled([])))
    started = sfn.start_execution(stateMachineArn=MACHINE)
    name = started["executionArn"].rsplit(":", 1)[1]
    assert len(name) == 36 and name.count("-") == 4
    server.wait(started["executionArn"], WAIT_S)
    assert sfn.describe_execution(executionArn=started["executionArn"])["input"] == "{}"


def test_a_fail_state_and_a_function_s_error_end_the_execution_failed_with_error_and_cause(
    server: StepFunctionsStandIn, sfn: Any
) -> None:
    def crash(_arn: str, _payload: Any) -> Any:
        raise FunctionInvokeError("ValueError", "n must be even")

    failing = MACHINE.replace("gco-test", "gco-crash")
    server.add(MACHINE, StateMachine(REFUSED, doubled([])))
    server.add(failing, StateMachine(WORK, crash))
    refused = sfn.start_execution(stateMachineArn=MACHINE, input="{}")["executionArn"]
    crashed = sfn.start_execution(stateMachineArn=failing, input='{"n": 1}')["executionArn"]
    assert server.wait(refused, WAIT_S).status == "FAILED"
    assert server.wait(crashed, WAIT_S).status == "FAILED"
    described = sfn.describe_execution(executionArn=refused)
    assert (described["status"], described["error"], described["cause"]) == (
        "FAILED",
        "NotGood",
        "the check said no",
    )
    assert "output" not in described and "stopDate" in described
    described = sfn.describe_execution(executionArn=crashed)
    assert described["error"] == "ValueError"
    assert json.loads(described["cause"]) == {"errorMessage": "n must be even", "errorType": "ValueError"}


def test_an_interpreter_that_raises_fails_the_execution_as_a_runtime_error_and_logs_it(
    server: StepFunctionsStandIn, sfn: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server.add(MACHINE, StateMachine(UNMODELLED, doubled([])))
    with caplog.at_level(logging.ERROR, logger="gco.local.assembly.stepfunctions"):
        arn = sfn.start_execution(stateMachineArn=MACHINE)["executionArn"]
        ended = server.wait(arn, WAIT_S)
    assert (ended.status, ended.error) == ("FAILED", "States.Runtime")
    assert ended.cause is not None and "'Parallel' is not modelled" in ended.cause
    described = sfn.describe_execution(executionArn=arn)
    assert (described["error"], described["cause"]) == ("States.Runtime", ended.cause)
    assert any(arn in record.getMessage() and record.exc_info for record in caplog.records)


def test_start_is_idempotent_while_running_and_the_name_is_taken_otherwise(
    server: StepFunctionsStandIn, sfn: Any
) -> None:
    gate = threading.Event()

    def held(_arn: str, payload: Any) -> Any:
        gate.wait(WAIT_S)  # the execution stays RUNNING until the test lets it go
        return {"doubled": payload["n"] * 2}

    server.add(MACHINE, StateMachine(WORK, held))
    first = sfn.start_execution(stateMachineArn=MACHINE, name="once", input='{"n": 1}')
    again = sfn.start_execution(stateMachineArn=MACHINE, name="once", input='{"n": 1}')
    assert (again["executionArn"], again["startDate"]) == (first["executionArn"], first["startDate"])
    running = sfn.describe_execution(executionArn=first["executionArn"])
    assert running["status"] == "RUNNING" and "stopDate" not in running and "output" not in running
    with pytest.raises(ClientError) as other_input:
        sfn.start_execution(stateMachineArn=MACHINE, name="once", input='{"n": 2}')
    assert error_code(other_input) == "ExecutionAlreadyExists"
    gate.set()
    assert server.wait(first["executionArn"], WAIT_S).output == {"doubled": 2}
    with pytest.raises(ClientError) as closed:
        sfn.start_execution(stateMachineArn=MACHINE, name="once", input='{"n": 1}')
    assert error_code(closed) == "ExecutionAlreadyExists"
    assert len(sfn.list_executions(stateMachineArn=MACHINE)["executions"]) == 1


def test_start_refuses_an_unknown_machine_a_bad_input_and_a_bad_name(
    server: StepFunctionsStandIn, sfn: Any
) -> None:
    server.add(MACHINE, StateMachine(WORK, doubled([])))
    cases = [
        ({"stateMachineArn": MACHINE.replace("gco-test", "absent")}, "StateMachineDoesNotExist"),
        ({"stateMachineArn": "arn:aws:lambda:us-east-1:123456789012:function:f"}, "InvalidArn"),
        ({"stateMachineArn": MACHINE, "input": "{not json"}, "InvalidExecutionInput"),
        ({"stateMachineArn": MACHINE, "name": "has space"}, "InvalidName"),
    ]
    for arguments, code in cases:
        with pytest.raises(ClientError) as refused:
            sfn.start_execution(**arguments)
        assert error_code(refused) == code, arguments
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert sfn.list_executions(stateMachineArn=MACHINE)["executions"] == []


def test_describe_and_wait_refuse_an_execution_that_was_never_started(
    server: StepFunctionsStandIn, sfn: Any
) -> None:
    absent = execution_arn(MACHINE, "never")
    with pytest.raises(ClientError) as refused:
        sfn.describe_execution(executionArn=absent)
    assert error_code(refused) == "ExecutionDoesNotExist"
    with pytest.raises(ExecutionWaitError, match="no execution"):
        server.wait(absent, WAIT_S)


def test_wait_gives_up_on_a_running_execution_at_its_timeout(server: StepFunctionsStandIn, sfn: Any) -> None:
    gate = threading.Event()
    server.add(MACHINE, StateMachine(WORK, lambda _arn, _payload: gate.wait(WAIT_S)))
    arn = sfn.start_execution(stateMachineArn=MACHINE, input='{"n": 1}')["executionArn"]
    try:
        with pytest.raises(ExecutionWaitError, match="still running"):
            server.wait(arn, 0.01)
    finally:
        gate.set()
    assert server.wait(arn, WAIT_S).status == "SUCCEEDED"


def test_list_executions_newest_first_with_a_status_filter(server: StepFunctionsStandIn, sfn: Any) -> None:
    other = MACHINE.replace("gco-test", "gco-other")
    server.add(MACHINE, StateMachine(WORK, doubled([])))
    server.add(other, StateMachine(WORK, doubled([])))
    names = {"good-1": '{"n": 1}', "bad": "{}", "good-2": '{"n": 2}'}  # no `n`: the task's path fails
    for name, text in names.items():
        server.wait(
            sfn.start_execution(stateMachineArn=MACHINE, name=name, input=text)["executionArn"], WAIT_S
        )
    server.wait(sfn.start_execution(stateMachineArn=other, input='{"n": 3}')["executionArn"], WAIT_S)
    listed = sfn.list_executions(stateMachineArn=MACHINE)["executions"]
    assert [item["name"] for item in listed] == ["good-2", "bad", "good-1"]
    assert all(item["stateMachineArn"] == MACHINE and "stopDate" in item for item in listed)
    succeeded = sfn.list_executions(stateMachineArn=MACHINE, statusFilter="SUCCEEDED")["executions"]
    assert [item["name"] for item in succeeded] == ["good-2", "good-1"]
    failed = sfn.list_executions(stateMachineArn=MACHINE, statusFilter="FAILED")["executions"]
    assert [(item["name"], item["status"]) for item in failed] == [("bad", "FAILED")]
    with pytest.raises(ClientError) as refused:
        sfn.list_executions(stateMachineArn=MACHINE.replace("gco-test", "absent"))
    assert error_code(refused) == "StateMachineDoesNotExist"


def test_the_service_specific_endpoint_variable_reaches_the_stand_in(
    server: StepFunctionsStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SFN", server.url)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    server.add(MACHINE, StateMachine(WORK, doubled([])))
    arn = aws.client("stepfunctions", region="us-east-1").start_execution(
        stateMachineArn=MACHINE, input='{"n": 4}'
    )["executionArn"]
    assert server.wait(arn, WAIT_S).output == {"doubled": 8}


def test_the_service_specific_variable_wins_over_the_general_one_passed_on(
    server: StepFunctionsStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI passes `--endpoint-url` (read from AWS_ENDPOINT_URL, the moto server) explicitly: a
    client of Step Functions still goes to AWS_ENDPOINT_URL_SFN, as the SDKs order the variables."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_SFN", server.url)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    server.add(MACHINE, StateMachine(WORK, doubled([])))
    client = aws.client("stepfunctions", region="us-east-1", endpoint_url="http://127.0.0.1:9")
    arn = client.start_execution(stateMachineArn=MACHINE, input='{"n": 2}')["executionArn"]
    assert server.wait(arn, WAIT_S).output == {"doubled": 4}
    other = aws.client("dynamodb", region="us-east-1", endpoint_url="http://127.0.0.1:9")
    assert other.meta.endpoint_url == "http://127.0.0.1:9"  # no variable of its own: the one passed


def test_unsigned_requests_and_unknown_operations_are_refused(server: StepFunctionsStandIn) -> None:
    server.add(MACHINE, StateMachine(WORK, doubled([])))
    headers = {
        "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": "AWSStepFunctions.StartExecution",
    }
    body = json.dumps({"stateMachineArn": MACHINE, "input": '{"n": 1}'})
    unsigned = httpx.post(server.url, headers=headers, content=body, timeout=WAIT_S)
    assert unsigned.status_code == 400
    assert unsigned.json()["__type"] == "MissingAuthenticationTokenException"
    signed = {
        **headers,
        "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20240101/us-east-1/states/aws4_request",
    }
    unknown = httpx.post(
        server.url,
        headers={**signed, "X-Amz-Target": "AWSStepFunctions.StopExecution"},
        content=body,
        timeout=WAIT_S,
    )
    assert (unknown.status_code, unknown.json()["__type"]) == (400, "UnknownOperationException")
    not_json = httpx.post(server.url, headers=signed, content=b"[1, 2", timeout=WAIT_S)
    assert (not_json.status_code, not_json.json()["__type"]) == (400, "SerializationException")
    started = httpx.post(server.url, headers=signed, content=body, timeout=WAIT_S)
    assert started.status_code == 200 and started.headers["Content-Type"] == "application/x-amz-json-1.0"
    assert server.wait(started.json()["executionArn"], WAIT_S).status == "SUCCEEDED"


def test_add_refuses_what_is_not_a_state_machine_s_arn(server: StepFunctionsStandIn) -> None:
    with pytest.raises(GcoInputError, match="stateMachineArn"):
        server.add(FUNCTION, StateMachine(WORK, doubled([])))
