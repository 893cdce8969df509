"""A Step Functions execution of a synthesized state machine definition, its tasks invoking the local
functions or AWS APIs: the local stack's stand-in for Step Functions running gco's state machines.

It runs the Amazon States Language as the AWS Step Functions Developer Guide defines it, for what gco's
definitions (the rollout machine, the GPU runner's) use:

- `Pass` (`Parameters`, `Result`), `Wait` (`Seconds`), `Succeed`, and `Fail` (`Error`, `Cause`,
  `CausePath`, a path or an intrinsic function);
- `Choice` ("Choice workflow state"): `Default`, and rules of `And`, `IsPresent`, `IsNumeric`,
  `BooleanEquals`, `StringEquals` and the five `Numeric` comparisons with a constant (`NumericEquals`,
  `NumericLessThan`, `NumericGreaterThan`, `NumericLessThanEquals`, `NumericGreaterThanEquals`). A
  value of another type than the comparison's does not match: "Step Functions doesn't attempt to match
  a numeric field to a string value";
- `InputPath`, `Parameters`, `ResultSelector`, `ResultPath` and `OutputPath` ("Input and Output
  Processing"), with reference paths of plain fields (`$`, `$.a.b`) and `[*]` after a field for each
  item of its list (items the rest of the path finds nothing in are left out, as JsonPath's
  indefinite paths leave them);
- the context object ("Context object"): `$$.Execution.Id`, `$$.Execution.Input`,
  `$$.Execution.Name`, `$$.Execution.StartTime`, `$$.State.EnteredTime`, `$$.State.Name`,
  `$$.State.RetryCount`, `$$.StateMachine.Id`, `$$.StateMachine.Name`, and `$$.Task.Token` while a
  callback task builds its `Parameters`; times in ISO 8601, UTC, to the millisecond
  (`2019-03-26T20:14:13.192Z`, as the guide's example);
- the intrinsic functions ("Intrinsic functions") `States.Format` (a string argument as it is, a
  number, boolean or null as JSON writes it; the reserved characters quote, braces and backslash
  escaped by a backslash), `States.JsonToString` (compact JSON), `States.StringSplit`,
  `States.ArrayLength`, and `States.Hash` (`MD5`, `SHA-1`, `SHA-256`, `SHA-384`, `SHA-512` of the
  UTF-8 input of at most 10,000 characters); an argument a function refuses is the error
  `States.IntrinsicFailure` (the guide's name for "the attempt to invoke an intrinsic function"
  failing). Where the guide's text is silent, LocalStack's emulator (checked against AWS) is followed:
  StringSplit splits at each character of its delimiter string and drops empty parts, Hash answers
  lowercase hex, JsonToString writes no spaces;
- `Task` ("Task workflow state") on a Lambda function's ARN, through `invoke` (a function's error
  reaches the state as Step Functions gives it: its `errorType` as the error name, a JSON `Cause` of
  `errorMessage` and `errorType`), or on an AWS SDK integration (below); `Retry` (`ErrorEquals`,
  `IntervalSeconds`, `MaxAttempts`, `BackoffRate`, and `JitterStrategy`: `FULL` sleeps a random time
  between 0 and the backoff, `NONE` the backoff, as the CDK's JitterType says) and `Catch`
  (`ErrorEquals`, `ResultPath`, `Next`). Error names ("Error handling in Step Functions"): a rule of
  `States.ALL` matches any error but `States.Runtime`, which "is not retriable, and will always cause
  the execution to fail"; `States.TaskFailed` matches any but `States.Timeout`.

AWS SDK integrations ("AWS SDK service integrations"): a Task whose `Resource` is
`arn:aws:states:::aws-sdk:<service>:<apiAction>` calls the API action ("always camel case") with its
`Parameters` as the request ("parameter names will be Pascal case") through the injected `sdk`
(`BotocoreSdk` is one made of botocore clients), and the API's response is the task's result. A
service's error is named `<ServiceName>.<ErrorName>`, "both in Pascal case": the exception prefix of
the guide's table of services (`Ec2`, `S3`), then the error's name with the `Exception` suffix added
where it has none ("always add the Exception suffix", `S3.BucketAlreadyExistsException`); an error
the service's model does not name is its prefix's own exception (`Ec2.Ec2Exception`: EC2's model
names none). With `.waitForTaskToken` ("Wait for a Callback with the Task Token") the call is made
with a new token in `$$.Task.Token`, then the task waits until `StateMachine.send_task_success` is
given the token (its output is the task's result), or `StateMachine.send_task_failure` (its error and
cause are the task's), or until its `TimeoutSeconds` (or `TimeoutSecondsPath`, 99999999 when neither
is given) pass since the task started, or its `HeartbeatSeconds` since the last heartbeat
(`StateMachine.send_task_heartbeat`): `States.Timeout` either way, as the Task state's fields say. A
retried callback task's every attempt has a token of its own ("a new random token is generated").

A construct it does not model (another state type, `Map`, `Parallel`, another intrinsic function or
Choice operator, a path with filters or indexes, another integration or pattern such as `.sync`,
`MaxDelaySeconds`, `HeartbeatSecondsPath`, `Credentials`, `States.HeartbeatTimeout` in an
`ErrorEquals`, a Fail state's `ErrorPath`, `States.Format` of an object or array) is an
`AssemblyError` naming it, never skipped. Not modelled either: the execution's `TimeoutSeconds`, a
Lambda or request-response SDK task's `TimeoutSeconds` and `HeartbeatSeconds` (the function's own
timeout holds), the context's `$$.Execution.RoleArn` (a path to it matches nothing), a Choice rule
whose `Variable` is missing (it does not match; Step Functions fails the execution), the 256 KiB
payload limits, and the execution history's events.
"""

from __future__ import annotations

import base64
import copy
import datetime
import hashlib
import json
import operator
import random
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore import xform_name
from botocore.exceptions import ClientError, ParamValidationError

from gco.errors import GcoInputError
from gco.local.errors import AssemblyError, FunctionInvokeError, StateError, TaskTokenError

MAX_TRANSITIONS = 10_000  # a bound of this stand-in's own: a definition that loops forever stops here
# A Task's TimeoutSeconds and HeartbeatSeconds when the definition gives none ("Task workflow state").
DEFAULT_TIMEOUT_S = 99_999_999
# How often a callback's wait reads the clock: an injected clock moves without waking the wait.
CLOCK_POLL_S = 0.05
# The machine of an execution started without an ARN (`StateMachine.start` called directly).
LOCAL_MACHINE_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:local"
HASH_INPUT_LIMIT = 10_000  # States.Hash's most input characters ("Intrinsic functions")
HASH_ALGORITHMS = {
    "MD5": "md5",
    "SHA-1": "sha1",
    "SHA-256": "sha256",
    "SHA-384": "sha384",
    "SHA-512": "sha512",
}
JITTER_STRATEGIES = ("FULL", "NONE")
# The exception prefix of each service an integration may call, from the developer guide's table of
# AWS SDK service integrations ("Exception prefix"); a service not here is refused, never guessed.
EXCEPTION_PREFIXES = {
    "dynamodb": "DynamoDb",
    "ec2": "Ec2",
    "iam": "Iam",
    "lambda": "Lambda",
    "s3": "S3",
    "sfn": "Sfn",
    "sns": "Sns",
    "sqs": "Sqs",
    "sts": "Sts",
}
_NUMERIC: dict[str, Callable[[Any, Any], bool]] = {
    "NumericEquals": operator.eq,
    "NumericLessThan": operator.lt,
    "NumericGreaterThan": operator.gt,
    "NumericLessThanEquals": operator.le,
    "NumericGreaterThanEquals": operator.ge,
}
_PATH = re.compile(r"\$\$?(\.[A-Za-z0-9_-]+(\[\*\])?)*")
_SEGMENT = re.compile(r"\.([A-Za-z0-9_-]+)(\[\*\])?")
_RESULT_PATH = re.compile(r"\$(\.[A-Za-z0-9_-]+)+")
_LAMBDA_ARN = re.compile(r"^arn:[\w-]+:lambda:")
_SDK_ARN = re.compile(
    r"^arn:[\w-]+:states:::aws-sdk:(?P<service>[a-z0-9-]+):(?P<action>[A-Za-z0-9]+)(?P<pattern>\.\w+)?$"
)
_EXECUTION_ARN = re.compile(
    r"^(?P<prefix>arn:[\w-]+:states:[a-z0-9-]+:\d{12}):execution:(?P<machine>[^:]+):(?P<name>[^:]+)$"
)
_TOKEN = re.compile(r"^[A-Za-z0-9+/]{64}$")  # the form of this stand-in's tokens (`new_task_token`)
_FUNCTION_NAME = re.compile(r"States\.[A-Za-z0-9]+")
_ARGUMENT_PATH = re.compile(r"\$[^,)\s]*")
_CONSTANT = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null")
_ESCAPED = ("'", "{", "}", "\\")  # the reserved characters of an intrinsic's string literal


@dataclass
class Execution:
    """How an execution ended: SUCCEEDED with its output, or FAILED with its error and cause."""

    status: str
    output: Any = None
    error: str | None = None
    cause: str | None = None
    visited: list[str] = field(default_factory=list)


# ---- paths ----------------------------------------------------------------------------------------


def get_path(data: Any, path: str, context: Any = None) -> Any:
    """The value at a reference path: `$` (the data), `$.a.b`, `$$.a.b` (in the context object), with
    `[*]` after a field for each item of its list.

    Raises:
        AssemblyError: a path with more than plain field names and `[*]`.
        StateError: `States.Runtime` when a field is missing, as Step Functions fails it.
    """
    if not isinstance(path, str) or not _PATH.fullmatch(path):
        raise AssemblyError(f"the path {path!r} is not modelled (plain fields and [*] only)")
    root, rest = (context, path[2:]) if path.startswith("$$") else (data, path[1:])
    segments = [(match.group(1), match.group(2) is not None) for match in _SEGMENT.finditer(rest)]
    return _select(root, segments, path)


def _select(data: Any, segments: list[tuple[str, bool]], path: str) -> Any:
    for index, (name, each) in enumerate(segments):
        if not isinstance(data, Mapping) or name not in data:
            raise StateError("States.Runtime", f"the path {path!r} matches nothing")
        data = data[name]
        if each:
            return _each(data, segments[index + 1 :], path)
    return data


def _each(items: Any, segments: list[tuple[str, bool]], path: str) -> list[Any]:
    """What the rest of the path finds in each item, in order; a nested `[*]`'s lists flattened."""
    if not isinstance(items, list):
        raise StateError("States.Runtime", f"the path {path!r} applies [*] to what is not a list")
    nested = any(each for _, each in segments)
    found: list[Any] = []
    for item in items:
        try:
            value = _select(item, segments, path)
        except StateError:
            continue  # an indefinite path leaves out the items it finds nothing in
        if nested:
            found.extend(value)
        else:
            found.append(value)
    return found


def _present(data: Any, path: str, context: Any = None) -> bool:
    try:
        get_path(data, path, context)
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
    if not _RESULT_PATH.fullmatch(path):
        raise AssemblyError(f"the path {path!r} is not modelled (plain fields only)")
    result: dict[str, Any] = copy.deepcopy(dict(data)) if isinstance(data, Mapping) else {}
    node = result
    names = path[2:].split(".")
    for name in names[:-1]:
        node = node.setdefault(name, {})
    node[names[-1]] = value
    return result


def parameters(template: Any, data: Any, context: Any = None) -> Any:
    """A `Parameters` or `ResultSelector` template filled from `data` and the context object (a key
    ending `.$` takes a path's value, or an intrinsic function's).

    Raises:
        AssemblyError: a path or an intrinsic function this stand-in does not model.
        StateError: `States.Runtime` when a path matches nothing; `States.IntrinsicFailure` when an
            intrinsic function refuses its arguments.
    """
    if isinstance(template, Mapping):
        return {
            (key[:-2] if key.endswith(".$") else key): reference(value, data, context)
            if key.endswith(".$")
            else parameters(value, data, context)
            for key, value in template.items()
        }
    if isinstance(template, list):
        return [parameters(item, data, context) for item in template]
    return template


def reference(expression: str, data: Any, context: Any = None) -> Any:
    """The value of a `.$` field's expression: an intrinsic function's (`States.Format(...)`), else
    the path's.

    Raises:
        AssemblyError: a path or an intrinsic function this stand-in does not model.
        StateError: `States.Runtime` when a path matches nothing; `States.IntrinsicFailure` when an
            intrinsic function refuses its arguments.
    """
    if isinstance(expression, str) and expression.startswith("States."):
        return _evaluate(_Parser(expression).whole(), data, context)
    return get_path(data, expression, context)


# ---- intrinsic functions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Text:
    """A string literal, split at each `{}` that is not escaped (a `States.Format` placeholder)."""

    pieces: tuple[str, ...]


@dataclass(frozen=True)
class _Path:
    path: str


@dataclass(frozen=True)
class _Constant:
    value: Any


@dataclass(frozen=True)
class _Call:
    name: str
    arguments: tuple[_Text | _Path | _Constant | _Call, ...]


_Node = _Text | _Path | _Constant | _Call


class _Parser:
    """One intrinsic function's invocation read into its nodes ("Intrinsic functions")."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def whole(self) -> _Call:
        call = self._call()
        if self.text[self.at :].strip():
            raise self._malformed("text after the call")
        return call

    def _call(self) -> _Call:
        match = _FUNCTION_NAME.match(self.text, self.at)
        if match is None:
            raise self._malformed("no function name")
        self.at = match.end()
        self._expect("(")
        arguments: list[_Node] = []
        while not self._next_is(")"):
            if arguments:
                self._expect(",")
            arguments.append(self._argument())
        self._expect(")")
        return _Call(match.group(0), tuple(arguments))

    def _argument(self) -> _Node:
        self._skip_space()
        if self.text.startswith("'", self.at):
            return self._literal()
        if self.text.startswith("States.", self.at):
            return self._call()
        for pattern, node in ((_ARGUMENT_PATH, _Path), (_CONSTANT, None)):
            match = pattern.match(self.text, self.at)
            if match is not None:
                self.at = match.end()
                return _Path(match.group(0)) if node is _Path else _Constant(json.loads(match.group(0)))
        raise self._malformed("an argument that is no string, number, path or function")

    def _literal(self) -> _Text:
        self.at += 1
        pieces = [""]
        while self.at < len(self.text):
            char = self.text[self.at]
            if char == "'":
                self.at += 1
                return _Text(tuple(pieces))
            if char == "\\":
                escaped = self.text[self.at + 1 : self.at + 2]
                if escaped not in _ESCAPED:
                    raise self._malformed("an open escape backslash")
                pieces[-1] += escaped
                self.at += 2
            elif self.text.startswith("{}", self.at):
                pieces.append("")
                self.at += 2
            else:
                pieces[-1] += char
                self.at += 1
        raise self._malformed("a string that does not end")

    def _next_is(self, char: str) -> bool:
        self._skip_space()
        return self.text.startswith(char, self.at)

    def _expect(self, char: str) -> None:
        if not self._next_is(char):
            raise self._malformed(f"no {char!r} at {self.at}")
        self.at += 1

    def _skip_space(self) -> None:
        while self.text[self.at : self.at + 1].isspace():
            self.at += 1

    def _malformed(self, why: str) -> AssemblyError:
        return AssemblyError(f"the intrinsic function {self.text!r} is malformed: {why}")


def _evaluate(node: _Node, data: Any, context: Any) -> Any:
    if isinstance(node, _Text):
        return "{}".join(node.pieces)
    if isinstance(node, _Path):
        return get_path(data, node.path, context)
    if isinstance(node, _Constant):
        return node.value
    if node.name == "States.Format":
        return _format(node, data, context)
    known = _FUNCTIONS.get(node.name)
    if known is None:
        raise AssemblyError(f"the intrinsic function {node.name} is not modelled by the local Step Functions")
    arity, function = known
    if len(node.arguments) != arity:
        raise _refused(node.name, f"takes {arity} argument(s), not {len(node.arguments)}")
    return function(*(_evaluate(argument, data, context) for argument in node.arguments))


def _format(call: _Call, data: Any, context: Any) -> str:
    """`States.Format`: the template's each `{}` replaced by the next argument's value."""
    if not call.arguments:
        raise _refused(call.name, "takes a template")
    template, *rest = call.arguments
    if isinstance(template, _Text):
        pieces = list(template.pieces)
    else:
        text = _evaluate(template, data, context)
        if not isinstance(text, str):
            raise _refused(call.name, "its template must be a string")
        pieces = text.split("{}")
    if len(rest) != len(pieces) - 1:
        raise _refused(call.name, f"has {len(pieces) - 1} {{}} and {len(rest)} value(s)")
    values = [_formatted(_evaluate(argument, data, context)) for argument in rest]
    return pieces[0] + "".join(value + piece for value, piece in zip(values, pieces[1:], strict=True))


def _formatted(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping | list):
        raise AssemblyError("States.Format of an object or array is not modelled by the local Step Functions")
    return json.dumps(value)


def _json_to_string(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _string_split(text: Any, delimiters: Any) -> list[str]:
    if not isinstance(text, str) or not isinstance(delimiters, str) or not delimiters:
        raise _refused("States.StringSplit", "takes a string and a non-empty string of delimiters")
    return [part for part in re.split(f"[{re.escape(delimiters)}]", text) if part]


def _array_length(items: Any) -> int:
    if not isinstance(items, list):
        raise _refused("States.ArrayLength", "takes an array")
    return len(items)


def _hash(text: Any, algorithm: Any) -> str:
    if not isinstance(text, str) or len(text) > HASH_INPUT_LIMIT:
        raise _refused("States.Hash", f"takes a string of at most {HASH_INPUT_LIMIT} characters")
    if algorithm not in HASH_ALGORITHMS:
        raise _refused("States.Hash", f"the algorithm {algorithm!r} is not one of {sorted(HASH_ALGORITHMS)}")
    return hashlib.new(HASH_ALGORITHMS[algorithm], text.encode("utf-8"), usedforsecurity=False).hexdigest()


_FUNCTIONS: dict[str, tuple[int, Callable[..., Any]]] = {
    "States.JsonToString": (1, _json_to_string),
    "States.StringSplit": (2, _string_split),
    "States.ArrayLength": (1, _array_length),
    "States.Hash": (2, _hash),
}


def _refused(function: str, why: str) -> StateError:
    return StateError("States.IntrinsicFailure", f"{function} {why}")


# ---- the context object and task tokens -----------------------------------------------------------


def iso_time(epoch_s: float) -> str:
    """A time as Step Functions writes it in the context object and an SDK result: ISO 8601, UTC, to
    the millisecond (`2019-03-26T20:14:13.192Z`)."""
    moment = datetime.datetime.fromtimestamp(epoch_s, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class _Run:
    """What the context object says of one execution (its states add theirs): its ARN's parts, its
    input and its start."""

    arn: str
    prefix: str
    machine: str
    name: str
    input: Any
    start_time: str

    @classmethod
    def of(cls, arn: str, execution_input: Any, started: float) -> _Run:
        """The execution `arn` started at `started` (epoch seconds) with `execution_input`.

        Raises:
            GcoInputError: `arn` is not an execution's ARN.
        """
        match = _EXECUTION_ARN.match(arn)
        if match is None:
            raise GcoInputError("execution_arn", f"{arn!r} is not an execution's ARN")
        prefix, machine, name = match.group("prefix", "machine", "name")
        return cls(arn, prefix, machine, name, execution_input, iso_time(started))

    def context(self, state: str, entered: str, retries: int = 0, token: str | None = None) -> dict[str, Any]:
        """The context object of the state `state`, entered at `entered`, on its attempt after
        `retries` retries, with the task token `token` of a callback task."""
        context: dict[str, Any] = {
            "Execution": {
                "Id": self.arn,
                "Input": self.input,
                "Name": self.name,
                "StartTime": self.start_time,
            },
            "State": {"EnteredTime": entered, "Name": state, "RetryCount": retries},
            "StateMachine": {"Id": f"{self.prefix}:stateMachine:{self.machine}", "Name": self.machine},
        }
        if token is not None:
            context["Task"] = {"Token": token}
        return context


def new_task_token() -> str:
    """A task token: 48 random bytes in base64, 64 characters whose alphabet has `+` and `/` (as the
    guide's example token has: a runner must take a token as it is)."""
    return base64.b64encode(secrets.token_bytes(48)).decode("ascii")


def is_task_token(text: str) -> bool:
    """Whether `text` has the form of this stand-in's task tokens (`new_task_token`)."""
    return _TOKEN.fullmatch(text) is not None


@dataclass
class _Answer:
    output: Any


@dataclass
class _Callback:
    """One callback task's token: when it opened, its last heartbeat, and its outcome once closed."""

    opened: float
    beat: float
    outcome: _Answer | StateError | None = None


class TaskTokens:
    """The task tokens of one state machine's callback tasks, open and closed, shared by the threads of
    its executions and those that answer them (thread-safe). `clock` measures the timeouts (injected:
    tests move it)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._changed = threading.Condition()
        self._tasks: dict[str, _Callback] = {}

    def open(self, token: str) -> None:
        """A callback task starts waiting on `token` (its timeouts count from now)."""
        with self._changed:
            now = self.clock()
            self._tasks[token] = _Callback(opened=now, beat=now)

    def knows(self, token: str) -> bool:
        """Whether `token` was ever given to a task here (open or closed)."""
        with self._changed:
            return token in self._tasks

    def close(self, token: str) -> None:
        """Close `token` unanswered (its task failed before it waited); later answers are refused."""
        with self._changed:
            callback = self._tasks[token]
            if callback.outcome is None:
                callback.outcome = StateError("States.Runtime", "the task closed before it waited")

    def succeed(self, token: str, output: Any) -> None:
        """The task of `token` succeeded with `output` (SendTaskSuccess).

        Raises:
            TaskTokenError: no task has that token (`TaskDoesNotExist`), or its task closed (`TaskTimedOut`).
        """
        self._answer(token, _Answer(output))

    def fail(self, token: str, error: str, cause: str) -> None:
        """The task of `token` failed with `error` and `cause` (SendTaskFailure).

        Raises:
            TaskTokenError: no task has that token (`TaskDoesNotExist`), or its task closed (`TaskTimedOut`).
        """
        self._answer(token, StateError(error, cause))

    def heartbeat(self, token: str) -> None:
        """The task of `token` is alive: its `HeartbeatSeconds` count again from now (SendTaskHeartbeat).

        Raises:
            TaskTokenError: no task has that token (`TaskDoesNotExist`), or its task closed (`TaskTimedOut`).
        """
        with self._changed:
            self._open_callback(token).beat = self.clock()

    def wait(self, token: str, timeout_s: float, heartbeat_s: float) -> Any:
        """The output the task of `token` is answered with, waiting for it.

        Raises:
            StateError: the failure it was answered with; `States.Timeout` when `timeout_s` passed
                since it opened, or `heartbeat_s` since its last heartbeat.
        """
        with self._changed:
            callback = self._tasks[token]
            while callback.outcome is None:
                left = min(callback.opened + timeout_s, callback.beat + heartbeat_s) - self.clock()
                if left <= 0:
                    callback.outcome = _timed_out(callback, self.clock(), timeout_s, heartbeat_s)
                    break
                self._changed.wait(min(left, CLOCK_POLL_S))
            outcome = callback.outcome
        if isinstance(outcome, StateError):
            raise outcome
        return outcome.output

    def _answer(self, token: str, outcome: _Answer | StateError) -> None:
        with self._changed:
            self._open_callback(token).outcome = outcome
            self._changed.notify_all()

    def _open_callback(self, token: str) -> _Callback:
        callback = self._tasks.get(token)
        if callback is None:
            raise TaskTokenError("TaskDoesNotExist", f"Task Does Not Exist: '{token}'")
        if callback.outcome is not None:
            raise TaskTokenError("TaskTimedOut", "Task Timed Out: 'Provided task does not exist anymore'")
        return callback


def _timed_out(callback: _Callback, now: float, timeout_s: float, heartbeat_s: float) -> StateError:
    if now >= callback.opened + timeout_s:
        return StateError(
            "States.Timeout", f"the task was not answered within {timeout_s:g} s (TimeoutSeconds)"
        )
    return StateError("States.Timeout", f"no heartbeat came within {heartbeat_s:g} s (HeartbeatSeconds)")


# ---- the interpreter --------------------------------------------------------------------------------

# An AWS SDK integration's call: (service, camelCase action, request) to the API's response as JSON,
# a service's error raised as the `StateError` Step Functions names it (`BotocoreSdk` is one).
Sdk = Callable[[str, str, Any], Any]


@dataclass(frozen=True)
class _Resource:
    """A Task's `Resource`: a Lambda function's ARN, or an SDK integration's service and action."""

    arn: str
    function: bool = False
    service: str = ""
    action: str = ""
    callback: bool = False


class StateMachine:
    """One definition, run as Step Functions runs it (see the module's docstring); several executions
    may run at once, each on its own thread.

    Parameters:
        definition: the ASL document, its tokens resolved (the functions' ARNs, the buckets' names).
        invoke: a function's invocation by its ARN (`AssetFunction.invoke` of the one with that ARN);
            None refuses a Lambda task.
        sleep: how a `Wait` or a retry's interval passes (injected: tests do not wait).
        sdk: an AWS SDK integration's call (`BotocoreSdk`); None refuses an SDK task.
        clock: what measures a callback task's timeouts (injected: tests move it).

    `tokens` holds its callback tasks' tokens (`TaskTokens`): the stand-in finds by them which machine
    an answer is for.
    """

    def __init__(
        self,
        definition: Mapping[str, Any],
        invoke: Callable[[str, Any], Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        *,
        sdk: Sdk | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.definition = definition
        self.invoke = invoke
        self.sleep = sleep
        self.sdk = sdk
        self.tokens = TaskTokens(clock)

    def start(
        self, execution_input: Any, *, execution_arn: str | None = None, started: float | None = None
    ) -> Execution:
        """Run one execution to its end: SUCCEEDED, or FAILED with the error that ended it.
        `execution_arn` and `started` (epoch seconds) are what its context object says of it (a
        random name of `LOCAL_MACHINE_ARN` and now when not given).

        Raises:
            AssemblyError: the definition uses what this stand-in does not model.
            GcoInputError: `execution_arn` is not an execution's ARN.
            StateError: a `Succeed` state's `OutputPath` or a `Fail` state's `CausePath` matches
                nothing (`States.Runtime`), or its intrinsic function refuses its arguments.
        """
        arn = execution_arn or LOCAL_MACHINE_ARN.replace(":stateMachine:", ":execution:") + f":{uuid.uuid4()}"
        run = _Run.of(arn, execution_input, time.time() if started is None else started)
        return self._run(run, execution_input)

    def send_task_success(self, token: str, output: Any) -> None:
        """Answer the callback task waiting on `token`: it succeeded with `output` (its result).

        Raises:
            TaskTokenError: no task has that token (`TaskDoesNotExist`), or its task closed (`TaskTimedOut`).
        """
        self.tokens.succeed(token, output)

    def send_task_failure(self, token: str, error: str, cause: str) -> None:
        """Answer the callback task waiting on `token`: it failed with `error` and `cause`.

        Raises:
            TaskTokenError: no task has that token (`TaskDoesNotExist`), or its task closed (`TaskTimedOut`).
        """
        self.tokens.fail(token, error, cause)

    def send_task_heartbeat(self, token: str) -> None:
        """The callback task waiting on `token` is alive: its `HeartbeatSeconds` count from now.

        Raises:
            TaskTokenError: no task has that token (`TaskDoesNotExist`), or its task closed (`TaskTimedOut`).
        """
        self.tokens.heartbeat(token)

    def _run(self, run: _Run, data: Any) -> Execution:
        states = self.definition["States"]
        name = self.definition["StartAt"]
        visited: list[str] = []
        for _ in range(MAX_TRANSITIONS):
            visited.append(name)
            state = states[name]
            context = run.context(name, iso_time(time.time()))
            if state["Type"] in ("Succeed", "Fail"):
                return self._end(state, data, context, visited)
            try:
                name, data = self._step(run, name, state, data, context)
            except StateError as error:
                return Execution("FAILED", error=error.error, cause=error.cause, visited=visited)
        return Execution("FAILED", error="States.Runtime", cause="too many transitions", visited=visited)

    @staticmethod
    def _end(state: Mapping[str, Any], data: Any, context: Any, visited: list[str]) -> Execution:
        if state["Type"] == "Succeed":
            return Execution(
                "SUCCEEDED", get_path(data, state.get("OutputPath", "$"), context), visited=visited
            )
        if "ErrorPath" in state:
            raise AssemblyError("a Fail state's ErrorPath is not modelled by the local Step Functions")
        cause = state.get("Cause")
        if "CausePath" in state:
            found = reference(state["CausePath"], data, context)
            cause = found if isinstance(found, str) else json.dumps(found)
        return Execution("FAILED", error=state.get("Error"), cause=cause, visited=visited)

    def _step(
        self, run: _Run, name: str, state: Mapping[str, Any], data: Any, context: Any
    ) -> tuple[str, Any]:
        kind = state["Type"]
        if kind == "Pass":
            return state["Next"], _pass(state, data, context)
        if kind == "Wait":
            self.sleep(float(state["Seconds"]))
            return state["Next"], data
        if kind == "Choice":
            return _choose(state, data, context), data
        if kind == "Task":
            return self._task(run, name, state, data, str(context["State"]["EnteredTime"]))
        raise AssemblyError(f"the state type {kind!r} is not modelled by the local Step Functions")

    def _task(
        self, run: _Run, name: str, state: Mapping[str, Any], data: Any, entered: str
    ) -> tuple[str, Any]:
        resource = _resource(str(state["Resource"]))
        _refuse_unmodelled(state)
        effective = get_path(data, state.get("InputPath", "$"), run.context(name, entered))
        retries: dict[int, int] = {}
        while True:
            token = new_task_token() if resource.callback else None
            context = run.context(name, entered, sum(retries.values()), token)
            # Built again for each attempt (a new token, a new RetryCount); a path or an intrinsic
            # that fails here fails the execution: it is no error of the task's to retry or catch.
            payload = (
                parameters(state["Parameters"], effective, context) if "Parameters" in state else effective
            )
            try:
                result = self._attempt(resource, payload, token, state, data)
            except StateError as error:
                delay = _retry_delay(state.get("Retry", []), error, retries)
                if delay is None:
                    return _caught(state, data, error)
                self.sleep(delay)
                continue
            return _task_output(state, data, result, context)

    def _attempt(
        self, resource: _Resource, payload: Any, token: str | None, state: Mapping[str, Any], data: Any
    ) -> Any:
        if resource.function:
            return self._invoke(resource.arn, payload)
        if self.sdk is None:
            raise AssemblyError(f"the task resource {resource.arn!r} needs an sdk, and none was given")
        if token is None:
            return self.sdk(resource.service, resource.action, payload)
        timeout_s, heartbeat_s = _timeouts(state, data)
        self.tokens.open(token)
        try:
            self.sdk(resource.service, resource.action, payload)
        except BaseException:
            self.tokens.close(token)
            raise
        return self.tokens.wait(token, timeout_s, heartbeat_s)

    def _invoke(self, arn: str, payload: Any) -> Any:
        if self.invoke is None:
            raise AssemblyError(f"the task resource {arn!r} needs an invoke, and none was given")
        try:
            return self.invoke(arn, payload)
        except FunctionInvokeError as failure:
            message = str(failure).split(": ", 1)[-1]
            cause = json.dumps({"errorMessage": message, "errorType": failure.error_type})
            raise StateError(failure.error_type, cause) from None


def _pass(state: Mapping[str, Any], data: Any, context: Any) -> Any:
    effective = get_path(data, state.get("InputPath", "$"), context)
    if "Parameters" in state:
        effective = parameters(state["Parameters"], effective, context)
    result = state.get("Result", effective)
    return get_path(
        set_path(data, state.get("ResultPath", "$"), result), state.get("OutputPath", "$"), context
    )


def _choose(state: Mapping[str, Any], data: Any, context: Any) -> str:
    for rule in state.get("Choices", []):
        if _rule(rule, data, context):
            return str(rule["Next"])
    if "Default" not in state:
        raise StateError("States.NoChoiceMatched", "no choice rule matched and there is no Default")
    return str(state["Default"])


def _rule(rule: Mapping[str, Any], data: Any, context: Any) -> bool:
    """Whether a Choice rule matches: `And` of its rules, or its comparison of the `Variable`'s value."""
    if "And" in rule:
        return all(_rule(inner, data, context) for inner in rule["And"])
    if "Variable" not in rule:
        raise AssemblyError(f"the choice rule {sorted(rule)} is not modelled")
    variable = rule["Variable"]
    if "IsPresent" in rule:
        return _present(data, variable, context) is bool(rule["IsPresent"])
    if not _present(data, variable, context):
        return False
    return _compare(rule, get_path(data, variable, context))


def _compare(rule: Mapping[str, Any], value: Any) -> bool:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if "IsNumeric" in rule:
        return number is bool(rule["IsNumeric"])
    if "BooleanEquals" in rule:
        return isinstance(value, bool) and value is rule["BooleanEquals"]
    if "StringEquals" in rule:
        return isinstance(value, str) and value == rule["StringEquals"]
    for name, compare in _NUMERIC.items():
        if name in rule:
            return number and compare(value, rule[name])
    raise AssemblyError(f"the choice rule {sorted(rule)} is not modelled")


def _resource(arn: str) -> _Resource:
    """A Task's `Resource` read: a Lambda function's ARN, or `arn:<partition>:states:::aws-sdk:...`.

    Raises:
        AssemblyError: another resource (an optimized integration, an activity) or pattern (`.sync`).
    """
    if _LAMBDA_ARN.match(arn):
        return _Resource(arn, function=True)
    match = _SDK_ARN.match(arn)
    if match is None:
        raise AssemblyError(f"the task resource {arn!r} is not modelled (a Lambda function or aws-sdk)")
    pattern = match.group("pattern")
    if pattern not in (None, ".waitForTaskToken"):
        raise AssemblyError(f"the integration pattern {pattern!r} of {arn!r} is not modelled")
    return _Resource(
        arn, service=match.group("service"), action=match.group("action"), callback=bool(pattern)
    )


def _timeouts(state: Mapping[str, Any], data: Any) -> tuple[float, float]:
    """A callback task's (TimeoutSeconds, HeartbeatSeconds); `TimeoutSecondsPath` reads the state input.

    Raises:
        StateError: `States.Runtime` when `TimeoutSecondsPath` is no positive integer.
    """
    timeout = state.get("TimeoutSeconds", DEFAULT_TIMEOUT_S)
    if "TimeoutSecondsPath" in state:
        timeout = get_path(data, state["TimeoutSecondsPath"])
        if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1:
            raise StateError(
                "States.Runtime", f"TimeoutSecondsPath gives {timeout!r}, not a positive integer"
            )
    return float(timeout), float(state.get("HeartbeatSeconds", DEFAULT_TIMEOUT_S))


def _refuse_unmodelled(state: Mapping[str, Any]) -> None:
    """Refuse a Task's field this stand-in does not model, before it runs (whichever path it takes).

    Raises:
        AssemblyError: `HeartbeatSecondsPath`, `Credentials`, a retrier's `MaxDelaySeconds` or a
            `JitterStrategy` other than FULL and NONE, `States.HeartbeatTimeout` in an `ErrorEquals`.
    """
    for name in ("HeartbeatSecondsPath", "Credentials"):
        if name in state:
            raise AssemblyError(f"a Task's {name} is not modelled by the local Step Functions")
    for retrier in state.get("Retry", []):
        if "MaxDelaySeconds" in retrier:
            raise AssemblyError("a retrier's MaxDelaySeconds is not modelled by the local Step Functions")
        if retrier.get("JitterStrategy", "NONE") not in JITTER_STRATEGIES:
            raise AssemblyError(f"the JitterStrategy {retrier['JitterStrategy']!r} is not modelled")
    for rule in [*state.get("Retry", []), *state.get("Catch", [])]:
        if "States.HeartbeatTimeout" in rule["ErrorEquals"]:
            raise AssemblyError(
                "States.HeartbeatTimeout in ErrorEquals is not modelled by the local Step Functions"
            )


def _retry_delay(retriers: list[Mapping[str, Any]], error: StateError, done: dict[int, int]) -> float | None:
    """Seconds until the next attempt, counted in `done`; None when no retrier takes the error (or the
    first that does has used its `MaxAttempts`)."""
    for index, retrier in enumerate(retriers):
        if not _matches(retrier["ErrorEquals"], error.error):
            continue
        jitter = retrier.get("JitterStrategy", "NONE")
        attempts = done.get(index, 0)
        if attempts >= int(retrier.get("MaxAttempts", 3)):
            return None
        done[index] = attempts + 1
        interval = (
            float(retrier.get("IntervalSeconds", 1)) * float(retrier.get("BackoffRate", 2.0)) ** attempts
        )
        return random.uniform(0, interval) if jitter == "FULL" else interval
    return None


def _caught(state: Mapping[str, Any], data: Any, error: StateError) -> tuple[str, Any]:
    """The first catcher that takes `error`: its next state, and its output (`Error` and `Cause`).

    Raises:
        StateError: `error`, when no catcher takes it.
    """
    for catcher in state.get("Catch", []):
        if _matches(catcher["ErrorEquals"], error.error):
            caught = {"Error": error.error, "Cause": error.cause}
            return catcher["Next"], set_path(data, catcher.get("ResultPath", "$"), caught)
    raise error


def _task_output(state: Mapping[str, Any], data: Any, result: Any, context: Any) -> tuple[str, Any]:
    if "ResultSelector" in state:
        result = parameters(state["ResultSelector"], result, context)
    merged = set_path(data, state.get("ResultPath", "$"), result)
    following = state.get("Next")
    if following is None:  # an `End` task: its output is the execution's (gco's tasks all have Next)
        raise AssemblyError("a Task that ends the execution is not modelled")
    return following, get_path(merged, state.get("OutputPath", "$"), context)


def _matches(names: list[str], error: str) -> bool:
    """Whether a Retry's or Catch's `ErrorEquals` covers `error` (`States.ALL` any but
    `States.Runtime`; `States.TaskFailed` any but `States.Timeout` and `States.Runtime`)."""
    if error == "States.Runtime":
        return False
    if "States.ALL" in names or error in names:
        return True
    return "States.TaskFailed" in names and error != "States.Timeout"


# ---- AWS SDK integrations through botocore ----------------------------------------------------------


class BotocoreSdk:
    """A `StateMachine`'s `sdk` made of botocore clients: `client(service)` gives the client of an
    integration's service (the name in the task's Resource, `ec2`, `s3`), made once per service. Its
    retries should be off or few: a state's `Retry` is what retries in Step Functions.

    It calls the operation whose name is the action's (`runInstances` is RunInstances, matched without
    regard to case among the service's operations) with the parameters' members matched likewise to the
    operation's input (Step Functions writes them in PascalCase where the API may not). The result is
    the response as JSON: its metadata dropped, its members' names in PascalCase (the guide's rule for
    parameters, taken for results too), a time in ISO 8601 (`iso_time`, as a Step Functions SDK result
    shows one: CreationTime 2013-08-23T01:02:15.422Z), bytes in base64. A service's error is the
    `StateError` Step Functions names (see the module's docstring), its cause the service's message
    with `(Service: <Prefix>, Status Code: <code>, Request ID: <id>)` after it, as the AWS SDK for Java
    writes a service's exception (and LocalStack's emulator a Step Functions cause).
    """

    def __init__(self, client: Callable[[str], Any]) -> None:
        self._client = client
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()  # executions' threads share the clients

    def __call__(self, service: str, action: str, request: Any) -> Any:
        """The response of `service`'s `action` to `request`, as Step Functions gives it to a task.

        Raises:
            AssemblyError: the service has no exception prefix here, no such operation, or the
                request does not fit the operation (Step Functions would refuse the definition).
            StateError: the service's error, named as Step Functions names it.
        """
        prefix = EXCEPTION_PREFIXES.get(service)
        if prefix is None:
            raise AssemblyError(f"aws-sdk:{service} is not modelled: its exception prefix is not known here")
        client = self._of(service)
        operation = client.meta.service_model.operation_model(_operation_name(client, service, action))
        try:
            response = getattr(client, xform_name(operation.name))(**_request(request, operation.input_shape))
        except ClientError as error:
            raise _sdk_error(prefix, client, error) from None
        except ParamValidationError as error:
            raise AssemblyError(f"aws-sdk:{service}:{action}: {error}") from None
        response.pop("ResponseMetadata", None)
        return _json_result(response, operation.output_shape)

    def _of(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                self._clients[service] = self._client(service)
            return self._clients[service]


def _operation_name(client: Any, service: str, action: str) -> str:
    """The operation an integration's camelCase action names.

    Raises:
        AssemblyError: the action is not camelCase, or the service has no such operation.
    """
    if not action[:1].islower():
        raise AssemblyError(f"aws-sdk:{service}:{action}: an API action is written in camelCase")
    wanted = (action[:1].upper() + action[1:]).lower()
    for name in client.meta.service_model.operation_names:
        if name.lower() == wanted:
            return str(name)
    raise AssemblyError(f"aws-sdk:{service}:{action}: the service has no such operation")


def _request(value: Any, shape: Any) -> Any:
    """`value` with each structure member's name as the operation's model spells it."""
    if shape is None:
        return value
    if shape.type_name == "structure" and isinstance(value, Mapping):
        names = {name.lower(): name for name in shape.members}
        renamed = {names.get(key.lower(), key): item for key, item in value.items()}
        return {key: _request(item, shape.members.get(key)) for key, item in renamed.items()}
    if shape.type_name == "list" and isinstance(value, list):
        return [_request(item, shape.member) for item in value]
    if shape.type_name == "map" and isinstance(value, Mapping):
        return {key: _request(item, shape.value) for key, item in value.items()}
    return value


def _json_result(value: Any, shape: Any) -> Any:
    """A botocore response as JSON: times in ISO 8601, bytes in base64, structure members in PascalCase.

    Raises:
        AssemblyError: a streaming member (not modelled).
    """
    kind = getattr(shape, "type_name", None)
    if isinstance(value, datetime.datetime):
        return iso_time(value.timestamp())
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping) and kind == "structure":
        return {
            key[:1].upper() + key[1:]: _json_result(item, shape.members.get(key))
            for key, item in value.items()
        }
    if isinstance(value, Mapping):
        return {key: _json_result(item, getattr(shape, "value", None)) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_result(item, getattr(shape, "member", None)) for item in value]
    if hasattr(value, "read"):
        raise AssemblyError("a streaming result of an SDK integration is not modelled")
    return value


def _sdk_error(prefix: str, client: Any, error: ClientError) -> StateError:
    """A service's error as Step Functions names it: `<Prefix>.<Name>Exception` for an error the
    service's model names, else `<Prefix>.<Prefix>Exception`."""
    details = error.response.get("Error", {})
    code = str(details.get("Code", ""))
    modelled = {shape.name for shape in client.meta.service_model.error_shapes}
    name = code if code in modelled else prefix
    name = name if name.endswith("Exception") else f"{name}Exception"
    metadata = error.response.get("ResponseMetadata", {})
    where = (
        f"Service: {prefix}, Status Code: {metadata.get('HTTPStatusCode')}, "
        f"Request ID: {metadata.get('RequestId')}"
    )
    return StateError(f"{prefix}.{name}", f"{details.get('Message', '')} ({where})")
