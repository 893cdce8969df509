"""What the GPU runner's definition needs of the local interpreter (gco.local.assembly.states): the
context object, the intrinsic functions, `[*]` paths, Choice's `And` and numeric rules, AWS SDK tasks
through an injected `sdk` (their results selected, their named errors retried with jitter and
caught), and callback tasks (`.waitForTaskToken`) answered, failed, retried and timed out on an
injected clock."""

from __future__ import annotations

import hashlib
import queue
import re
import threading
from collections.abc import Callable
from typing import Any

import pytest

from gco.errors import GcoInputError
from gco.local.assembly.states import (
    LOCAL_MACHINE_ARN,
    Execution,
    StateMachine,
    get_path,
    is_task_token,
    iso_time,
    new_task_token,
    parameters,
)
from gco.local.errors import AssemblyError, StateError, TaskTokenError

WAIT_S = 10.0  # a bound on every wait: these executions end in milliseconds once answered
ARN = "arn:aws:states:us-east-1:123456789012:execution:gco-gpu-runner:run-7"
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
SDK = "arn:aws:states:::aws-sdk"
Call = tuple[str, str, Any]


class Clock:
    """A clock the test moves (callback timeouts read it; nothing else moves it)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def answering(answers: list[Any], calls: list[Call]) -> Callable[[str, str, Any], Any]:
    """An `sdk` that records each call and answers the next of `answers` (raising an exception one)."""

    def sdk(service: str, action: str, request: Any) -> Any:
        calls.append((service, action, request))
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return sdk


def one_state(state: dict[str, Any]) -> dict[str, Any]:
    return {"StartAt": "S", "States": {"S": {**state, "Next": "End"}, "End": {"Type": "Succeed"}}}


def test_the_context_object_in_parameters() -> None:
    fields = ["Execution.Id", "Execution.Name", "Execution.Input", "Execution.StartTime", "State.Name",
              "State.EnteredTime", "State.RetryCount", "StateMachine.Id", "StateMachine.Name"]  # fmt: skip
    definition = {
        "StartAt": "Read",
        "States": {
            "Read": {"Type": "Pass", "Parameters": {f"{f}.$": f"$$.{f}" for f in fields},
                     "ResultPath": "$.context", "Next": "Done"},
            "Done": {"Type": "Succeed", "OutputPath": "$.context"},
        },
    }  # fmt: skip
    ran = StateMachine(definition).start({"job": 1}, execution_arn=ARN, started=1553631253.192)
    context = ran.output
    assert (context["Execution.Id"], context["Execution.Name"], context["Execution.Input"]) == (
        ARN,
        "run-7",
        {"job": 1},
    )
    assert context["Execution.StartTime"] == "2019-03-26T20:14:13.192Z"  # the guide's example time
    assert (context["State.Name"], context["State.RetryCount"]) == ("Read", 0)
    assert ISO.match(context["State.EnteredTime"])
    assert context["StateMachine.Id"] == "arn:aws:states:us-east-1:123456789012:stateMachine:gco-gpu-runner"
    assert context["StateMachine.Name"] == "gco-gpu-runner"


def test_the_context_outside_a_callback_has_no_token_and_a_start_needs_an_execution_arn() -> None:
    no_token = one_state({"Type": "Pass", "Parameters": {"t.$": "$$.Task.Token"}})
    ran = StateMachine(no_token).start({})
    assert (ran.status, ran.error) == ("FAILED", "States.Runtime")
    named = one_state({"Type": "Pass", "Parameters": {"id.$": "$$.Execution.Id"}, "ResultPath": "$.id"})
    ran = StateMachine(named).start({})  # no ARN given: a random name of the local machine
    assert ran.output["id"]["id"].startswith(LOCAL_MACHINE_ARN.replace(":stateMachine:", ":execution:") + ":")
    with pytest.raises(GcoInputError, match="execution_arn"):
        StateMachine(named).start({}, execution_arn=LOCAL_MACHINE_ARN)
    assert iso_time(0) == "1970-01-01T00:00:00.000Z"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("States.Format('{} and {}', $.s, $.n)", "text and 1.5"),
        ("States.Format('{} {} {}', $.yes, $.none, $.whole)", "true null 60"),
        (r"States.Format('\{\} \'q\' \\ {}', $.s)", "{} 'q' \\ text"),  # the reserved characters escaped
        ("States.Format($.template, $.s)", "<text>"),
        ("States.JsonToString($.object)", '{"a":[1,2],"b":"é"}'),
        ("States.StringSplit('This.is+a,test=string', '.+,=')", ["This", "is", "a", "test", "string"]),
        ("States.StringSplit('a..b', '.')", ["a", "b"]),  # empty parts dropped
        ("States.ArrayLength(States.StringSplit(States.Format('{}', $.whole), '.'))", 1),
        ("States.ArrayLength(States.StringSplit(States.Format('{}', $.n), '.'))", 2),
        ("States.Hash('abc', 'SHA-1')", hashlib.sha1(b"abc", usedforsecurity=False).hexdigest()),
        ("States.Hash(States.Format('{}/Launch', $$.Execution.Name), 'SHA-256')",
         hashlib.sha256(b"run-7/Launch").hexdigest()),
    ],
)  # fmt: skip
def test_intrinsic_functions(expression: str, expected: Any) -> None:
    data = {"s": "text", "n": 1.5, "whole": 60, "yes": True, "none": None, "template": "<{}>",
            "object": {"a": [1, 2], "b": "é"}}  # fmt: skip
    context = {"Execution": {"Name": "run-7"}}
    assert parameters({"value.$": expression}, data, context) == {"value": expected}


@pytest.mark.parametrize(
    ("expression", "raised", "message"),
    [
        ("States.Hash($.n, 'SHA-1')", StateError, "States.IntrinsicFailure"),
        ("States.Hash('a', 'CRC32')", StateError, "States.IntrinsicFailure"),
        ("States.Format('{} {}', $.s)", StateError, "States.IntrinsicFailure"),
        ("States.ArrayLength($.s)", StateError, "States.IntrinsicFailure"),
        ("States.StringSplit($.n, '.')", StateError, "States.IntrinsicFailure"),
        ("States.JsonToString($.s, $.s)", StateError, "States.IntrinsicFailure"),
        ("States.Format('{}', $.missing)", StateError, "States.Runtime"),
        ("States.UUID()", AssemblyError, "States.UUID is not modelled"),
        ("States.Format('{}', $.object)", AssemblyError, "object or array is not modelled"),
        ("States.Format('open", AssemblyError, "malformed"),
        (r"States.Format('\n')", AssemblyError, "open escape backslash"),
        ("States.Format('x') trailing", AssemblyError, "malformed"),
    ],
)
def test_intrinsic_functions_refuse_what_they_cannot_take(
    expression: str, raised: type[Exception], message: str
) -> None:
    with pytest.raises(raised, match=re.escape(message)):
        parameters({"value.$": expression}, {"s": "text", "n": 1.5, "object": {}})


def test_paths_select_each_item_of_a_list() -> None:
    reservation = {"Instances": [{"InstanceId": "i-1"}, {"InstanceId": "i-2"}, {"State": "none"}]}
    assert get_path(reservation, "$.Instances[*].InstanceId") == [
        "i-1",
        "i-2",
    ]  # the item without it left out
    nested = {"r": [{"i": [{"id": 1}, {"id": 2}]}, {"i": [{"id": 3}]}]}
    assert get_path(nested, "$.r[*].i[*].id") == [1, 2, 3]
    assert get_path({"a": 1}, "$$.a", {"a": 2}) == 2
    with pytest.raises(StateError, match="not a list"):
        get_path({"Instances": {}}, "$.Instances[*].InstanceId")
    with pytest.raises(StateError, match="matches nothing"):
        get_path({}, "$$.Task.Token")  # no context object given
    with pytest.raises(AssemblyError, match="not modelled"):
        get_path(reservation, "$.Instances[0].InstanceId")


QUEUE = "$.job.settings.queue_timeout_seconds"
CHOICE: dict[str, Any] = {
    "StartAt": "Read",
    "States": {
        "Read": {
            "Type": "Choice",
            "Choices": [
                {"Variable": QUEUE, "IsPresent": False, "Next": "Absent"},
                {"And": [{"Variable": QUEUE, "IsNumeric": True},
                         {"Variable": QUEUE, "NumericGreaterThanEquals": 1},
                         {"Variable": QUEUE, "NumericLessThanEquals": 99999999}], "Next": "InRange"},
                {"Variable": QUEUE, "NumericLessThan": 1, "Next": "Small"},
            ],
            "Default": "Other",
        },
        **{name: {"Type": "Succeed"} for name in ("Absent", "InRange", "Small", "Other")},
    },
}  # fmt: skip


@pytest.mark.parametrize(
    ("settings", "end"),
    [
        ({}, "Absent"),
        ({"queue_timeout_seconds": 60}, "InRange"),
        ({"queue_timeout_seconds": 60.5}, "InRange"),
        ({"queue_timeout_seconds": 0}, "Small"),
        ({"queue_timeout_seconds": 100_000_000}, "Other"),
        ({"queue_timeout_seconds": "60"}, "Other"),  # a string is never compared as a number
        ({"queue_timeout_seconds": True}, "Other"),  # nor a boolean
    ],
)
def test_choice_and_of_numeric_rules(settings: dict[str, Any], end: str) -> None:
    assert StateMachine(CHOICE).start({"job": {"settings": settings}}).visited == ["Read", end]


def test_choice_rules_not_modelled_are_refused_by_name() -> None:
    for rule in ({"Or": [], "Next": "E"}, {"Variable": "$.a", "StringMatches": "x*", "Next": "E"}):
        definition = {
            "StartAt": "C",
            "States": {"C": {"Type": "Choice", "Choices": [rule]}, "E": {"Type": "Succeed"}},
        }
        with pytest.raises(AssemblyError, match="not modelled"):
            StateMachine(definition).start({"a": "x"})


def launch_definition(retry: dict[str, Any] | None = None) -> dict[str, Any]:
    """The runner's launch and terminate, in small: an SDK task's result selected, retried, caught."""
    retrier = {"ErrorEquals": ["Ec2.RequestLimitExceeded", "Ec2.Ec2Exception"], "IntervalSeconds": 5,
               "MaxAttempts": 2, "BackoffRate": 2, "JitterStrategy": "FULL", **(retry or {})}  # fmt: skip
    return {
        "StartAt": "Launch",
        "States": {
            "Launch": {
                "Type": "Task",
                "Resource": f"{SDK}:ec2:runInstances",
                "Parameters": {
                    "ClientToken.$": "States.Hash(States.Format('{}/Launch', $$.Execution.Name), 'SHA-1')",
                    "MinCount": 1,
                },
                "ResultSelector": {"InstanceIds.$": "$.Instances[*].InstanceId"},
                "ResultPath": "$.instance",
                "Retry": [retrier],
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Failed"}],
                "Next": "Terminate",
            },
            "Terminate": {
                "Type": "Task",
                "Resource": f"{SDK}:ec2:terminateInstances",
                "Parameters": {"InstanceIds.$": "$.instance.InstanceIds"},
                "ResultPath": None,
                "Next": "Done",
            },
            "Done": {"Type": "Succeed"},
            "Failed": {"Type": "Fail", "Error": "LaunchFailed",
                       "CausePath": "States.Format('{}: {}', $.error.Error, $.error.Cause)"},
        },
    }  # fmt: skip


def test_an_sdk_task_calls_the_action_and_its_result_is_selected() -> None:
    calls: list[Call] = []
    answers: list[Any] = [
        {"Instances": [{"InstanceId": "i-1"}, {"InstanceId": "i-2"}]},
        {"TerminatingInstances": []},
    ]
    ran = StateMachine(launch_definition(), sdk=answering(answers, calls)).start(
        {"job": {}}, execution_arn=ARN
    )
    assert (ran.status, ran.visited) == ("SUCCEEDED", ["Launch", "Terminate", "Done"])
    assert ran.output == {"job": {}, "instance": {"InstanceIds": ["i-1", "i-2"]}}  # ResultPath null kept it
    client_token = hashlib.sha1(b"run-7/Launch", usedforsecurity=False).hexdigest()
    assert calls == [
        ("ec2", "runInstances", {"ClientToken": client_token, "MinCount": 1}),
        ("ec2", "terminateInstances", {"InstanceIds": ["i-1", "i-2"]}),
    ]


def test_a_named_sdk_error_is_retried_with_full_jitter_then_caught() -> None:
    sleeps: list[float] = []
    throttled = StateError("Ec2.Ec2Exception", "Request limit exceeded. (Service: Ec2, Status Code: 503)")
    machine = StateMachine(launch_definition(), sleep=sleeps.append, sdk=answering([throttled] * 3, []))
    ran = machine.start({})
    assert len(sleeps) == 2 and 0 <= sleeps[0] <= 5 and 0 <= sleeps[1] <= 10  # MaxAttempts 2; 5 s, then x2
    assert (ran.status, ran.error, ran.visited) == ("FAILED", "LaunchFailed", ["Launch", "Failed"])
    assert ran.cause == "Ec2.Ec2Exception: Request limit exceeded. (Service: Ec2, Status Code: 503)"


def test_an_error_no_retrier_names_is_caught_at_once_and_no_jitter_sleeps_the_backoff() -> None:
    sleeps: list[float] = []
    missing = StateError("S3.NoSuchBucketException", "The specified bucket does not exist")
    ran = StateMachine(launch_definition(), sleep=sleeps.append, sdk=answering([missing], [])).start({})
    assert (ran.error, sleeps) == ("LaunchFailed", [])
    throttled = StateError("Ec2.Ec2Exception", "slow down")
    steady = StateMachine(launch_definition({"JitterStrategy": "NONE"}), sleep=sleeps.append,
                          sdk=answering([throttled, throttled, {"Instances": []}, {}], []))  # fmt: skip
    assert steady.start({}).status == "SUCCEEDED" and sleeps == [5.0, 10.0]


def test_a_runtime_error_is_never_caught_and_what_is_not_modelled_is_refused() -> None:
    no_path = launch_definition()
    no_path["States"]["Launch"]["Parameters"] = {"MinCount.$": "$.absent"}
    ran = StateMachine(no_path, sdk=answering([], [])).start({})
    assert (ran.status, ran.error, ran.visited) == (
        "FAILED",
        "States.Runtime",
        ["Launch"],
    )  # Catch States.ALL skipped
    refused = [
        ({"Resource": f"{SDK}:ec2:runInstances"}, None, "needs an sdk"),
        ({"Resource": f"{SDK}:ecs:runTask.sync"}, answering([], []), "'.sync'"),
        ({"Resource": "arn:aws:states:::s3:putObject"}, answering([], []), "not modelled"),
    ]
    for fields, sdk, message in refused:
        with pytest.raises(AssemblyError, match=re.escape(message)):
            StateMachine(one_state({"Type": "Task", **fields}), sdk=sdk).start({})
    unmodelled: list[tuple[dict[str, Any], dict[str, Any], str]] = [
        ({"MaxDelaySeconds": 30}, {}, "MaxDelaySeconds"),
        ({"JitterStrategy": "HALF"}, {}, "'HALF'"),
        ({"ErrorEquals": ["States.HeartbeatTimeout"]}, {}, "States.HeartbeatTimeout"),
        ({}, {"HeartbeatSecondsPath": "$.beat"}, "HeartbeatSecondsPath"),
        ({}, {"Credentials": {"RoleArn": "arn:aws:iam::123456789012:role/r"}}, "Credentials"),
    ]
    for retrier, fields, message in unmodelled:  # refused before the task runs, errors or none
        definition = launch_definition(retrier)
        definition["States"]["Launch"].update(fields)
        with pytest.raises(AssemblyError, match=re.escape(message)):
            StateMachine(definition, sdk=answering([{"Instances": []}, {}], [])).start({})


CALLBACK: dict[str, Any] = {
    "StartAt": "Await",
    "States": {
        "Await": {
            "Type": "Task",
            "Resource": f"{SDK}:s3:putObject.waitForTaskToken",
            "Parameters": {"Bucket": "evidence", "Key": "jobs/run-7.json",
                           "Body.$": "States.Format('{} {} {}', $$.Task.Token, $$.State.RetryCount, "
                                     "States.JsonToString($))"},
            "HeartbeatSeconds": 10,
            "TimeoutSecondsPath": "$.seconds",
            "ResultPath": "$.result",
            "Retry": [{"ErrorEquals": ["Runner.Flaky"], "IntervalSeconds": 1, "MaxAttempts": 1}],
            "Catch": [{"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "TimedOut"},
                      {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Failed"}],
            "Next": "Done",
        },
        "Done": {"Type": "Succeed", "OutputPath": "$.result"},
        "TimedOut": {"Type": "Fail", "Error": "TimedOut", "CausePath": "$.error.Cause"},
        "Failed": {"Type": "Fail", "Error": "Failed",
                   "CausePath": "States.Format('{}: {}', $.error.Error, $.error.Cause)"},
    },
}  # fmt: skip


class Callback:
    """A callback machine running on a thread, its put bodies (token, retry count, input) queued."""

    def __init__(self, seconds: int = 100, sdk_errors: list[Exception] | None = None) -> None:
        self.clock = Clock()
        self.bodies: queue.Queue[list[str]] = queue.Queue()
        self.errors = list(sdk_errors or [])
        self.machine = StateMachine(CALLBACK, sleep=lambda _s: None, sdk=self.put, clock=self.clock)
        self.ended: list[Execution] = []
        self.thread = threading.Thread(
            target=lambda: self.ended.append(self.machine.start({"seconds": seconds}))
        )
        self.thread.start()

    def put(self, service: str, action: str, request: Any) -> Any:
        assert (service, action, request["Bucket"]) == ("s3", "putObject", "evidence")
        self.bodies.put(request["Body"].split(" ", 2))
        if self.errors:
            raise self.errors.pop(0)
        return {"ETag": '"e"'}

    def token(self) -> str:
        token, _retries, _input = self.bodies.get(timeout=WAIT_S)
        return token

    def end(self) -> Execution:
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive() and len(self.ended) == 1
        return self.ended[0]


def test_a_callback_task_waits_for_its_token_s_success() -> None:
    running = Callback()
    token, retries, state_input = running.bodies.get(timeout=WAIT_S)
    assert is_task_token(token) and retries == "0" and state_input == '{"seconds":100}'
    running.thread.join(0.2)
    assert running.thread.is_alive()  # waiting: nobody answered
    with pytest.raises(TaskTokenError) as unknown:
        running.machine.send_task_success(new_task_token(), {})
    assert unknown.value.code == "TaskDoesNotExist"
    running.machine.send_task_success(token, {"runner": "r-1"})
    ended = running.end()
    assert (ended.status, ended.output, ended.visited) == ("SUCCEEDED", {"runner": "r-1"}, ["Await", "Done"])
    lates: list[Callable[[], None]] = [
        lambda: running.machine.send_task_success(token, {}),
        lambda: running.machine.send_task_heartbeat(token),
    ]
    for late in lates:
        with pytest.raises(TaskTokenError) as closed:
            late()
        assert closed.value.code == "TaskTimedOut"


def test_a_failure_is_the_task_s_error_and_a_retried_callback_gets_a_new_token() -> None:
    running = Callback()
    first = running.token()
    running.machine.send_task_failure(first, "Runner.Flaky", "try again")  # the retrier takes it
    second, retries, _input = running.bodies.get(timeout=WAIT_S)
    assert second != first and retries == "1"  # the context object's RetryCount of the second attempt
    running.machine.send_task_failure(second, "Runner.Flaky", "still")  # MaxAttempts 1: caught now
    ended = running.end()
    assert (ended.error, ended.cause, ended.visited) == ("Failed", "Runner.Flaky: still", ["Await", "Failed"])


def test_a_callback_whose_call_fails_closes_its_token() -> None:
    running = Callback(sdk_errors=[StateError("S3.NoSuchBucketException", "no bucket")])
    token = running.token()
    ended = running.end()
    assert (ended.error, ended.cause) == ("Failed", "S3.NoSuchBucketException: no bucket")
    with pytest.raises(TaskTokenError) as closed:
        running.machine.send_task_success(token, {})
    assert closed.value.code == "TaskTimedOut"


def test_heartbeats_hold_the_task_until_one_is_missed() -> None:
    running = Callback()
    token = running.token()
    for _ in range(3):  # 27 s in all, never 10 s without a heartbeat
        running.clock.now += 9
        running.machine.send_task_heartbeat(token)
    running.thread.join(0.2)
    assert running.thread.is_alive()
    running.clock.now += 11
    ended = running.end()
    assert (ended.error, ended.visited) == ("TimedOut", ["Await", "TimedOut"])  # caught as States.Timeout
    assert ended.cause == "no heartbeat came within 10 s (HeartbeatSeconds)"


def test_the_timeout_read_from_the_input_bounds_the_wait() -> None:
    running = Callback(seconds=5)
    running.token()
    running.clock.now += 5
    ended = running.end()
    assert (ended.error, ended.cause) == ("TimedOut", "the task was not answered within 5 s (TimeoutSeconds)")
    not_whole = Callback(seconds=0)  # TimeoutSecondsPath must give a positive integer: no call is made
    assert (not_whole.end().error, not_whole.bodies.empty()) == ("States.Runtime", True)
