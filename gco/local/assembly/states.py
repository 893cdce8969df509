"""A Step Functions execution of a synthesized state machine definition, its tasks invoking the local
functions: the local stack's stand-in for Step Functions running gco's state machines.

It runs the Amazon States Language as the Step Functions Developer Guide defines it, for what gco's
definitions use: `Pass` (`Result`), `Task` on a Lambda function's ARN (`Parameters` with `.$` paths,
`Retry`: `ErrorEquals`, `IntervalSeconds`, `MaxAttempts`, `BackoffRate`; `Catch`: `ErrorEquals`,
`ResultPath`, `Next`), `Choice` (`BooleanEquals`, `StringEquals`, `IsPresent`, `Default`), `Wait`
(`Seconds`), `Succeed` and `Fail` (`Error`, `Cause`, `CausePath`, with `States.Format`), and
`InputPath`, `ResultPath` and `OutputPath` as reference paths (`$`, `$.a.b`). A function's error
reaches the state as Step Functions gives it: its `errorType` as the error name, a JSON `Cause` of
`errorMessage` and `errorType`; `States.ALL` catches any, `States.TaskFailed` any but a timeout.

A construct it does not model (another state type, `Map`, `Parallel`, an intrinsic other than
`States.Format`, a path with filters or wildcards) is an `AssemblyError` naming it, never skipped.
Not modelled either: a task's and the execution's `TimeoutSeconds` (the function's own timeout
holds), `HeartbeatSeconds`, and the execution history's events.
"""

from __future__ import annotations

import copy
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gco.local.errors import AssemblyError, FunctionInvokeError, StateError

MAX_TRANSITIONS = 10_000  # a bound of this stand-in's own: a definition that loops forever stops here
_FORMAT = re.compile(r"^States\.Format\('((?:[^'\\]|\\.)*)'((?:\s*,\s*\$[\w.]*)*)\)$")


@dataclass
class Execution:
    """How an execution ended: SUCCEEDED with its output, or FAILED with its error and cause."""

    status: str
    output: Any = None
    error: str | None = None
    cause: str | None = None
    visited: list[str] = field(default_factory=list)


def get_path(data: Any, path: str) -> Any:
    """The value at a reference path (`$`, `$.a.b`).

    Raises:
        AssemblyError: a path with more than plain field names.
        StateError: `States.Runtime` when a field is missing, as Step Functions fails it.
    """
    if path == "$":
        return data
    if not re.fullmatch(r"\$(\.[A-Za-z0-9_-]+)+", path):
        raise AssemblyError(f"the path {path!r} is not modelled (plain fields only)")
    for name in path[2:].split("."):
        if not isinstance(data, Mapping) or name not in data:
            raise StateError("States.Runtime", f"the path {path!r} matches nothing")
        data = data[name]
    return data


def _present(data: Any, path: str) -> bool:
    try:
        get_path(data, path)
    except StateError:
        return False
    return True


def set_path(data: Any, path: str | None, value: Any) -> Any:
    """`data` with `value` at `path` (a `ResultPath`): `$` replaces it, None discards the value.

    Raises:
        AssemblyError: a path with more than plain field names.
    """
    if path is None:
        return data
    if path == "$":
        return value
    if not re.fullmatch(r"\$(\.[A-Za-z0-9_-]+)+", path):
        raise AssemblyError(f"the path {path!r} is not modelled (plain fields only)")
    result: dict[str, Any] = copy.deepcopy(dict(data)) if isinstance(data, Mapping) else {}
    node = result
    names = path[2:].split(".")
    for name in names[:-1]:
        node = node.setdefault(name, {})
    node[names[-1]] = value
    return result


def parameters(template: Any, data: Any) -> Any:
    """A `Parameters` or `ResultSelector` template filled from `data` (keys ending `.$` are paths).

    Raises:
        AssemblyError: a path with more than plain field names.
        StateError: `States.Runtime` when a path matches nothing.
    """
    if isinstance(template, Mapping):
        return {
            (key[:-2] if key.endswith(".$") else key): get_path(data, value)
            if key.endswith(".$")
            else parameters(value, data)
            for key, value in template.items()
        }
    if isinstance(template, list):
        return [parameters(item, data) for item in template]
    return template


def _format(expression: str, data: Any) -> str:
    match = _FORMAT.match(expression)
    if match is None:
        return str(get_path(data, expression))
    text, arguments = match.group(1), [a.strip() for a in match.group(2).split(",") if a.strip()]
    for argument in arguments:
        value = get_path(data, argument)
        text = text.replace("{}", value if isinstance(value, str) else json.dumps(value), 1)
    return text


class StateMachine:
    """One definition, run as Step Functions runs it (see the module's docstring).

    Parameters:
        definition: the ASL document, its tokens resolved (the functions' ARNs).
        invoke: a function's invocation by its ARN (`AssetFunction.invoke` of the one with that ARN).
        sleep: how a `Wait` or a retry's interval passes (injected: tests do not wait).
    """

    def __init__(
        self,
        definition: Mapping[str, Any],
        invoke: Callable[[str, Any], Any],
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.definition = definition
        self.invoke = invoke
        self.sleep = sleep

    def start(self, execution_input: Any) -> Execution:
        """Run one execution to its end: SUCCEEDED, or FAILED with the error that ended it.

        Raises:
            AssemblyError: the definition uses what this stand-in does not model.
            StateError: a `Fail` state's `CausePath` matches nothing.
        """
        states = self.definition["States"]
        name, data = self.definition["StartAt"], execution_input
        visited: list[str] = []
        for _ in range(MAX_TRANSITIONS):
            visited.append(name)
            state = states[name]
            kind = state["Type"]
            if kind == "Succeed":
                return Execution("SUCCEEDED", get_path(data, state.get("OutputPath", "$")), visited=visited)
            if kind == "Fail":
                cause = _format(state["CausePath"], data) if "CausePath" in state else state.get("Cause")
                return Execution("FAILED", error=state.get("Error"), cause=cause, visited=visited)
            try:
                name, data = self._step(kind, state, data)
            except StateError as error:
                return Execution("FAILED", error=error.error, cause=error.cause, visited=visited)
        return Execution("FAILED", error="States.Runtime", cause="too many transitions", visited=visited)

    def _step(self, kind: str, state: Mapping[str, Any], data: Any) -> tuple[str, Any]:
        if kind == "Pass":
            result = state.get("Result", get_path(data, state.get("InputPath", "$")))
            return state["Next"], get_path(
                set_path(data, state.get("ResultPath", "$"), result), state.get("OutputPath", "$")
            )
        if kind == "Wait":
            self.sleep(float(state["Seconds"]))
            return state["Next"], data
        if kind == "Choice":
            return self._choose(state, data), data
        if kind == "Task":
            return self._task(state, data)
        raise AssemblyError(f"the state type {kind!r} is not modelled by the local Step Functions")

    def _choose(self, state: Mapping[str, Any], data: Any) -> str:
        for rule in state.get("Choices", []):
            variable = rule["Variable"]
            if "IsPresent" in rule:
                matched = _present(data, variable) == rule["IsPresent"]
            elif not _present(data, variable):
                matched = False
            elif "BooleanEquals" in rule:
                matched = get_path(data, variable) is rule["BooleanEquals"]
            elif "StringEquals" in rule:
                matched = get_path(data, variable) == rule["StringEquals"]
            else:
                raise AssemblyError(f"the choice rule {sorted(rule)} is not modelled")
            if matched:
                return str(rule["Next"])
        if "Default" not in state:
            raise StateError("States.NoChoiceMatched", "no choice rule matched and there is no Default")
        return str(state["Default"])

    def _task(self, state: Mapping[str, Any], data: Any) -> tuple[str, Any]:
        payload = get_path(data, state.get("InputPath", "$"))
        if "Parameters" in state:
            payload = parameters(state["Parameters"], payload)
        try:
            result = self._with_retries(state, payload)
        except StateError as error:
            for catcher in state.get("Catch", []):
                if _matches(catcher["ErrorEquals"], error.error):
                    caught = {"Error": error.error, "Cause": error.cause}
                    return catcher["Next"], set_path(data, catcher.get("ResultPath", "$"), caught)
            raise
        if "ResultSelector" in state:
            result = parameters(state["ResultSelector"], result)
        merged = set_path(data, state.get("ResultPath", "$"), result)
        following = state.get("Next")
        if following is None:  # an `End` task: its output is the execution's (gco's tasks all have Next)
            raise AssemblyError("a Task that ends the execution is not modelled")
        return following, get_path(merged, state.get("OutputPath", "$"))

    def _with_retries(self, state: Mapping[str, Any], payload: Any) -> Any:
        attempts: dict[int, int] = {}
        while True:
            try:
                return self.invoke(str(state["Resource"]), payload)
            except FunctionInvokeError as failure:
                message = str(failure).split(": ", 1)[-1]
                error = StateError(
                    failure.error_type, json.dumps({"errorMessage": message, "errorType": failure.error_type})
                )
            for index, retrier in enumerate(state.get("Retry", [])):
                if _matches(retrier["ErrorEquals"], error.error):
                    done = attempts.get(index, 0)
                    if done >= int(retrier.get("MaxAttempts", 3)):
                        raise error
                    interval = (
                        float(retrier.get("IntervalSeconds", 1))
                        * float(retrier.get("BackoffRate", 2.0)) ** done
                    )
                    attempts[index] = done + 1
                    self.sleep(interval)
                    break
            else:
                raise error


def _matches(names: list[str], error: str) -> bool:
    """Whether a Retry's or Catch's `ErrorEquals` covers `error` (`States.ALL` any; `States.TaskFailed`
    any but `States.Timeout`)."""
    if "States.ALL" in names or error in names:
        return True
    return "States.TaskFailed" in names and error != "States.Timeout"
