"""A Step Functions execution of an ASL definition (gco.local.assembly.states), with stand-in tasks and
an injected sleep: paths, retries with backoff, catchers, choices, waits and the end states."""

from __future__ import annotations

from typing import Any

import pytest

from gco.local.assembly.states import StateMachine, get_path, parameters, set_path
from gco.local.errors import AssemblyError, FunctionInvokeError

TRANSIENT = ["Lambda.ServiceException"]
DEFINITION: dict[str, Any] = {
    "StartAt": "Init",
    "States": {
        "Init": {"Type": "Pass", "Result": {"done": False}, "ResultPath": "$.run", "Next": "Work"},
        "Work": {
            "Type": "Task",
            "Resource": "arn:aws:lambda:us-east-1:123456789012:function:work",
            "Parameters": {"n.$": "$.n", "fixed": 1},
            "ResultPath": "$.run",
            "Retry": [{"ErrorEquals": TRANSIENT, "IntervalSeconds": 2, "MaxAttempts": 2, "BackoffRate": 3}],
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Failed"}],
            "Next": "Done?",
        },
        "Done?": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.run.done", "BooleanEquals": True, "Next": "Verdict"}],
            "Default": "Pause",
        },
        "Pause": {"Type": "Wait", "Seconds": 15, "Next": "Work"},
        "Verdict": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.run.outcome", "StringEquals": "good", "Next": "Good"}],
            "Default": "Bad",
        },
        "Good": {"Type": "Succeed", "OutputPath": "$.run"},
        "Bad": {"Type": "Fail", "Error": "NotGood", "CausePath": "$.run.outcome"},
        "Failed": {
            "Type": "Fail",
            "Error": "WorkFailed",
            "CausePath": "States.Format('{}: {}', $.error.Error, $.error.Cause)",
        },
    },
}


def machine(answers: list[Any], sleeps: list[float], calls: list[Any]) -> StateMachine:
    def invoke(arn: str, payload: Any) -> Any:
        calls.append((arn.rsplit(":", 1)[1], payload))
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return StateMachine(DEFINITION, invoke, sleep=sleeps.append)


def test_a_loop_that_waits_then_succeeds_with_its_output_path() -> None:
    sleeps: list[float] = []
    calls: list[Any] = []
    ran = machine([{"done": False}, {"done": True, "outcome": "good"}], sleeps, calls).start({"n": 3})
    assert (ran.status, ran.output) == ("SUCCEEDED", {"done": True, "outcome": "good"})
    assert ran.visited == ["Init", "Work", "Done?", "Pause", "Work", "Done?", "Verdict", "Good"]
    assert calls == [("work", {"n": 3, "fixed": 1})] * 2 and sleeps == [15.0]


def test_retries_back_off_then_the_catcher_takes_the_error() -> None:
    sleeps: list[float] = []
    transient = FunctionInvokeError("Lambda.ServiceException", "busy")
    ran = machine([transient, transient, transient], sleeps, []).start({"n": 1})
    assert sleeps == [2.0, 6.0]  # IntervalSeconds, times BackoffRate per attempt; MaxAttempts 2
    assert (ran.status, ran.error) == ("FAILED", "WorkFailed")
    assert (
        ran.cause
        == 'Lambda.ServiceException: {"errorMessage": "busy", "errorType": "Lambda.ServiceException"}'
    )


def test_a_function_error_is_caught_at_once_and_a_verdict_fails_with_its_cause() -> None:
    ran = machine([FunctionInvokeError("RolloutInputError", "settings: bad")], [], []).start({"n": 1})
    assert ran.error == "WorkFailed" and ran.cause is not None and ran.cause.startswith("RolloutInputError: ")
    bad = machine([{"done": True, "outcome": "meh"}], [], []).start({"n": 1})
    assert (bad.status, bad.error, bad.cause) == ("FAILED", "NotGood", "meh")


def test_paths_and_what_is_not_modelled() -> None:
    assert get_path({"a": {"b": 2}}, "$.a.b") == 2
    assert set_path({"a": 1}, "$.b.c", 2) == {"a": 1, "b": {"c": 2}} and set_path({"a": 1}, None, 2) == {
        "a": 1
    }
    assert parameters({"x.$": "$.a", "y": [{"z.$": "$.a"}]}, {"a": 5}) == {"x": 5, "y": [{"z": 5}]}
    with pytest.raises(AssemblyError, match="not modelled"):
        get_path({}, "$.items[0]")
    with pytest.raises(AssemblyError, match="'Map' is not modelled"):
        StateMachine({"StartAt": "M", "States": {"M": {"Type": "Map"}}}, lambda _a, _p: None).start({})
    states = {"P": {"Type": "Pass", "InputPath": "$.nope", "Next": "E"}, "E": {"Type": "Succeed"}}
    missing = StateMachine({"StartAt": "P", "States": states}, lambda _a, _p: None)
    assert missing.start({}).error == "States.Runtime"
