"""Step Functions' API for the local stack's state machines, stood in on loopback: what a caller's AWS
SDK sends to `states.<region>.amazonaws.com` is answered here, the executions run by the interpreter
of `gco.local.assembly.states`.

`StepFunctionsStandIn` is an HTTP server speaking the API's JSON protocol (awsJson1_0: `POST /` with
`X-Amz-Target: AWSStepFunctions.<Operation>` and a JSON body; an error is HTTP 400 with a body of
`__type` and `message`). A botocore `stepfunctions` client reaches it through `endpoint_url` or
`AWS_ENDPOINT_URL_SFN` (botocore's service-specific endpoint variable for Step Functions). Its state
machines are registered in Python (`StepFunctionsStandIn.add`: an ARN and a `StateMachine`), not
created through the API. It answers:

- StartExecution: the execution runs on a thread of its own; the answer is its ARN
  (`arn:<partition>:states:<region>:<account>:execution:<machine>:<name>`, the name a UUID when none
  is given) and its start date. As the API Reference's StartExecution says for a STANDARD workflow,
  it is idempotent: the same name and input as a running execution answers that execution again;
  the same name while that execution is closed, or with another input, is `ExecutionAlreadyExists`.
  An unknown machine is `StateMachineDoesNotExist`, an input that is not JSON
  `InvalidExecutionInput`, a name Step Functions forbids `InvalidName`, a malformed ARN `InvalidArn`.
- DescribeExecution: status (RUNNING, SUCCEEDED, FAILED), input, start and stop dates, the output of
  a succeeded execution, the error and cause of a failed one; an unknown one is
  `ExecutionDoesNotExist`.
- ListExecutions: a machine's executions, newest first, with an optional `statusFilter`.
- SendTaskSuccess (`taskToken`, `output`: a JSON text), SendTaskFailure (`taskToken`, optional `error`
  and `cause`, taken as empty when absent) and SendTaskHeartbeat (`taskToken`): the answer to the
  callback task (`.waitForTaskToken`) of whichever hosted machine gave that token, which its
  execution resumes with (`StateMachine.send_task_success`); an empty answer. As the API Reference
  lists their errors: a token that is not of the form this stand-in gives is `InvalidToken`, one no
  task was given `TaskDoesNotExist`, one whose task has closed (answered, failed, timed out)
  `TaskTimedOut`, an output that is not JSON `InvalidOutput`; a token longer than 2,048 characters,
  an error longer than 256 or a cause longer than 32,768 is a `ValidationException`.
- any other operation: `UnknownOperationException`.

An execution's context object (`$$.Execution.Id`, `$$.Execution.StartTime`) is its ARN and its start
date. An interpreter that raises (an `AssemblyError`: a construct it does not model) ends its execution
FAILED with error `States.Runtime` and the exception's message as the cause, the traceback logged.
A request without a SigV4 `Authorization` header (`AWS4-HMAC-SHA256 Credential=...`) is refused 400
`MissingAuthenticationTokenException` ("Request is missing Authentication Token"), as the JSON
services of AWS answer an unsigned request.

What it does not model: the caller's authentication and authorization (the header's shape is all
that is checked: no signature, key, session or clock skew is verified and no IAM policy is
evaluated), the execution history (GetExecutionHistory) and its events, activities (GetActivityTask:
a task token is only ever a callback task's), Express workflows and StartSyncExecution (every
execution is a STANDARD one), StopExecution (an interpreter's thread cannot be stopped) and the
execution's own `TimeoutSeconds`, and so the ABORTED and TIMED_OUT statuses (an execution waiting
on a token nobody answers, with no task timeout, runs until the stand-in is gone), redrive, the
90-day retention of executions, their names and their task tokens (kept until the stand-in is gone,
never freed), pagination (`maxResults` and `nextToken` are ignored: one page), versions, aliases and
qualified ARNs, the 256 KiB limit on input and output (a task's output included), `traceHeader`,
the quota of open executions, and every operation on state machines and activities
(CreateStateMachine and the rest).
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gco.errors import GcoInputError
from gco.local.assembly.states import Execution, StateMachine, is_task_token
from gco.local.errors import ExecutionWaitError, StateError, TaskTokenError

log = logging.getLogger(__name__)

TARGET_PREFIX = "AWSStepFunctions."
JSON_CONTENT_TYPE = "application/x-amz-json-1.0"
SIGV4_PREFIX = "AWS4-HMAC-SHA256 Credential="
POLL_S = 0.05  # how often the server looks for `stop`: it returns within this, not serve_forever's 0.5 s
# The API's ExecutionStatus values; this stand-in's executions only ever take the first three.
EXECUTION_STATUSES = ("RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "PENDING_REDRIVE")
_MACHINE_ARN = re.compile(
    r"^arn:(?P<partition>[\w-]+):states:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
    r"stateMachine:(?P<name>[^:\s]{1,80})$"
)
_EXECUTION_ARN = re.compile(r"^arn:[\w-]+:states:[a-z0-9-]+:\d{12}:execution:[^:\s]{1,80}:[^:\s]{1,80}$")
# StartExecution's `name`: 1 to 80 characters, none of whitespace, brackets, wildcards, the special
# characters the API Reference lists, or control characters.
_EXECUTION_NAME = re.compile(r'^[^\s<>{}\[\]?*"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f]{1,80}$')
# The API Reference's length constraints of SendTaskSuccess and SendTaskFailure's members.
TOKEN_LIMIT = 2048
ERROR_LIMIT = 256
CAUSE_LIMIT = 32_768


class _ApiError(Exception):
    """An error answer of the API (HTTP 400): its code, the `__type`, and its message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class _Run:
    """One execution: what StartExecution was given, and how it ended once it has (`result`)."""

    arn: str
    machine_arn: str
    name: str
    input: str
    start: float
    stop: float | None = None
    result: Execution | None = None
    ended: threading.Event = field(default_factory=threading.Event)

    def summary(self) -> dict[str, Any]:
        """ListExecutions' item: the execution's ARN, machine, name, status and dates."""
        return self._summary(self.result)

    def _summary(self, result: Execution | None) -> dict[str, Any]:
        item: dict[str, Any] = {
            "executionArn": self.arn,
            "stateMachineArn": self.machine_arn,
            "name": self.name,
            "status": "RUNNING" if result is None else result.status,
            "startDate": self.start,
        }
        if result is not None:
            item["stopDate"] = self.stop
        return item

    def description(self) -> dict[str, Any]:
        """DescribeExecution's answer: the summary, the input, and the output or the error."""
        result = self.result  # read once: the execution's thread sets it while a request reads it
        described = {**self._summary(result), "input": self.input, "inputDetails": {"included": True}}
        if result is not None and result.status == "SUCCEEDED":
            described["output"] = json.dumps(result.output)
            described["outputDetails"] = {"included": True}
        elif result is not None:
            described.update({"error": result.error, "cause": result.cause})
        return {key: value for key, value in described.items() if value is not None}


class StepFunctionsStandIn:
    """Step Functions' StartExecution, DescribeExecution, ListExecutions and the callbacks of task
    tokens for state machines run by the local interpreter, on loopback (see the module's docstring).
    `url` is its endpoint; it serves from `start` (or entering it as a context manager) until `stop`.
    """

    def __init__(self) -> None:
        self._machines: dict[str, StateMachine] = {}
        self._hosted: list[StateMachine] = []  # every machine added, replaced ones too: their tokens live on
        self._runs: dict[str, _Run] = {}
        self._lock = threading.Lock()  # the request threads and `add` share the two tables
        self._operations: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "StartExecution": self._start_execution,
            "DescribeExecution": self._describe_execution,
            "ListExecutions": self._list_executions,
            "SendTaskSuccess": self._send_task_success,
            "SendTaskFailure": self._send_task_failure,
            "SendTaskHeartbeat": self._send_task_heartbeat,
        }
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=functools.partial(self._server.serve_forever, poll_interval=POLL_S),
            daemon=True,
            name="sfn-standin",
        )

    def add(self, arn: str, machine: StateMachine) -> None:
        """Host `machine` as the state machine `arn` (`arn:aws:states:<region>:<account>:stateMachine:
        <name>`), replacing one of that ARN.

        Raises:
            GcoInputError: `arn` is not a state machine's ARN.
        """
        if _MACHINE_ARN.match(arn) is None:
            raise GcoInputError("stateMachineArn", f"{arn!r} is not a state machine's ARN")
        with self._lock:
            self._machines[arn] = machine
            self._hosted.append(machine)

    def executions(self) -> list[str]:
        """The ARN of every execution started, in the order they started."""
        with self._lock:
            return list(self._runs)

    def wait(self, execution_arn: str, timeout: float) -> Execution:
        """How the execution `execution_arn` ended, waiting at most `timeout` seconds for it to end.

        Raises:
            ExecutionWaitError: no execution has that ARN, or it was still running at the timeout.
        """
        with self._lock:
            run = self._runs.get(execution_arn)
        if run is None:
            raise ExecutionWaitError(f"no execution {execution_arn!r} was started")
        if not run.ended.wait(timeout) or run.result is None:
            raise ExecutionWaitError(f"the execution {execution_arn!r} is still running after {timeout:g} s")
        return run.result

    def answer(self, target: str, authorization: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) of one request, from its `X-Amz-Target`, `Authorization` and body."""
        if not authorization.startswith(SIGV4_PREFIX):
            return 400, _error(
                "MissingAuthenticationTokenException", "Request is missing Authentication Token"
            )
        name = target.removeprefix(TARGET_PREFIX) if target.startswith(TARGET_PREFIX) else ""
        operation = self._operations.get(name)
        if operation is None:
            return 400, _error("UnknownOperationException", f"no such operation: {target or '(none)'}")
        try:
            return 200, operation(_request(body))
        except _ApiError as refused:
            return 400, _error(refused.code, refused.message)

    def _start_execution(self, request: dict[str, Any]) -> dict[str, Any]:
        machine_arn = _string(request, "stateMachineArn")
        machine = self._machine(machine_arn)
        name = _execution_name(request.get("name"))
        text = request.get("input")
        text = "{}" if text is None else text
        execution_input = _execution_input(text)
        arn = execution_arn(machine_arn, name)
        with self._lock:
            existing = self._runs.get(arn)
            if existing is not None:
                return _started_again(existing, text)
            run = _Run(arn, machine_arn, name, text, time.time())
            self._runs[arn] = run
        threading.Thread(
            target=self._execute, args=(run, machine, execution_input), daemon=True, name=f"sfn-{name}"
        ).start()
        return {"executionArn": arn, "startDate": run.start}

    def _describe_execution(self, request: dict[str, Any]) -> dict[str, Any]:
        arn = _string(request, "executionArn")
        if _EXECUTION_ARN.match(arn) is None:
            raise _ApiError("InvalidArn", f"Invalid Arn: '{arn}'")
        with self._lock:
            run = self._runs.get(arn)
        if run is None:
            raise _ApiError("ExecutionDoesNotExist", f"Execution Does Not Exist: '{arn}'")
        return run.description()

    def _list_executions(self, request: dict[str, Any]) -> dict[str, Any]:
        machine_arn = _string(request, "stateMachineArn")
        self._machine(machine_arn)
        wanted = request.get("statusFilter")
        if wanted is not None and wanted not in EXECUTION_STATUSES:
            raise _ApiError(
                "ValidationException", f"statusFilter {wanted!r} is not one of {EXECUTION_STATUSES}"
            )
        with self._lock:
            runs = [run for run in self._runs.values() if run.machine_arn == machine_arn]
        items = [run.summary() for run in reversed(runs)]  # started (and so added) in order: newest first
        return {"executions": [item for item in items if wanted is None or item["status"] == wanted]}

    def _send_task_success(self, request: dict[str, Any]) -> dict[str, Any]:
        token = _token(request)
        text = request.get("output")
        if not isinstance(text, str):
            raise _ApiError("ValidationException", "1 validation error detected: 'output' must be given")
        try:
            output = json.loads(text)
        except json.JSONDecodeError as error:
            raise _ApiError("InvalidOutput", f"Invalid Output: '{error}'") from None
        return self._answer(token, lambda machine: machine.send_task_success(token, output))

    def _send_task_failure(self, request: dict[str, Any]) -> dict[str, Any]:
        token = _token(request)
        error = _optional(request, "error", ERROR_LIMIT)
        cause = _optional(request, "cause", CAUSE_LIMIT)
        return self._answer(token, lambda machine: machine.send_task_failure(token, error, cause))

    def _send_task_heartbeat(self, request: dict[str, Any]) -> dict[str, Any]:
        token = _token(request)
        return self._answer(token, lambda machine: machine.send_task_heartbeat(token))

    def _answer(self, token: str, answer: Callable[[StateMachine], None]) -> dict[str, Any]:
        """Give the machine that gave `token` its answer; the API's empty answer."""
        if not is_task_token(token):
            raise _ApiError("InvalidToken", f"Invalid Token: '{token}'")
        with self._lock:
            hosted = list(self._hosted)
        machine = next((machine for machine in hosted if machine.tokens.knows(token)), None)
        if machine is None:
            raise _ApiError("TaskDoesNotExist", f"Task Does Not Exist: '{token}'")
        try:
            answer(machine)
        except TaskTokenError as refused:
            raise _ApiError(refused.code, refused.message) from None
        return {}

    def _machine(self, arn: str) -> StateMachine:
        if _MACHINE_ARN.match(arn) is None:
            raise _ApiError("InvalidArn", f"Invalid Arn: '{arn}'")
        with self._lock:
            machine = self._machines.get(arn)
        if machine is None:
            raise _ApiError("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{arn}'")
        return machine

    def _execute(self, run: _Run, machine: StateMachine, execution_input: Any) -> None:
        """Run one execution to its end on its own thread, and record how it ended."""
        try:
            result = machine.start(execution_input, execution_arn=run.arn, started=run.start)
        except StateError as error:  # a Fail state's CausePath that matches nothing: its own error
            result = Execution("FAILED", error=error.error, cause=error.cause)
        except Exception as error:  # the execution must end, never stay RUNNING with its thread gone
            log.exception("the local Step Functions execution %s could not run", run.arn)
            result = Execution("FAILED", error="States.Runtime", cause=str(error))
        run.stop = time.time()
        run.result = result
        run.ended.set()

    def start(self) -> StepFunctionsStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; executions still running finish on their own (daemon) threads."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> StepFunctionsStandIn:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def execution_arn(machine_arn: str, name: str) -> str:
    """The ARN Step Functions gives the execution `name` of the state machine `machine_arn`."""
    prefix, _, machine = machine_arn.rpartition(":stateMachine:")
    return f"{prefix}:execution:{machine}:{name}"


def _started_again(existing: _Run, text: str) -> dict[str, Any]:
    """StartExecution's answer to a name already used: the same answer while that execution runs with
    the same input (the call is idempotent), else `ExecutionAlreadyExists`."""
    if existing.result is None and existing.input == text:
        return {"executionArn": existing.arn, "startDate": existing.start}
    raise _ApiError("ExecutionAlreadyExists", f"Execution Already Exists: '{existing.arn}'")


def _request(body: bytes) -> dict[str, Any]:
    """The request's JSON object (an empty body is an empty object, as botocore sends no members)."""
    try:
        request = json.loads(body or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _ApiError("SerializationException", f"the body is not JSON: {error}") from None
    if not isinstance(request, dict):
        raise _ApiError("SerializationException", "the body is not a JSON object")
    return request


def _string(request: dict[str, Any], member: str) -> str:
    value = request.get(member)
    if not isinstance(value, str) or not value:
        raise _ApiError("ValidationException", f"1 validation error detected: '{member}' must be given")
    return value


def _token(request: dict[str, Any]) -> str:
    token = _string(request, "taskToken")
    if len(token) > TOKEN_LIMIT:
        raise _ApiError(
            "ValidationException",
            f"1 validation error detected: 'taskToken' must be at most {TOKEN_LIMIT} characters long",
        )
    return token


def _optional(request: dict[str, Any], member: str, limit: int) -> str:
    """An optional string member (empty when absent), at most `limit` characters long."""
    value = request.get(member)
    value = "" if value is None else value
    if not isinstance(value, str) or len(value) > limit:
        raise _ApiError(
            "ValidationException",
            f"1 validation error detected: '{member}' must be a string of at most {limit} characters",
        )
    return value


def _execution_name(name: Any) -> str:
    if name is None:
        return str(uuid.uuid4())
    if not isinstance(name, str) or _EXECUTION_NAME.match(name) is None:
        raise _ApiError("InvalidName", f"Invalid Name: '{name}'")
    return name


def _execution_input(text: Any) -> Any:
    if not isinstance(text, str):
        raise _ApiError("InvalidExecutionInput", "Invalid State Machine Execution Input: not a string")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise _ApiError(
            "InvalidExecutionInput", f"Invalid State Machine Execution Input: '{error}'"
        ) from None


def _error(code: str, message: str) -> dict[str, Any]:
    return {"__type": code, "message": message}


def _handler(stand_in: StepFunctionsStandIn) -> type[BaseHTTPRequestHandler]:
    """The request handler class of one stand-in's server."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = self.headers.get("Content-Length", "0")
            body = self.rfile.read(int(length)) if length.isdigit() else b""
            status, answer = stand_in.answer(
                self.headers.get("X-Amz-Target", ""), self.headers.get("Authorization", ""), body
            )
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", JSON_CONTENT_TYPE)
            self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_: Any) -> None:
            return

    return Handler
