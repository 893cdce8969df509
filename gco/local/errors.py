"""Errors of the embedded local stack.

    LocalError                     (gco.errors.GcoError; exit 1)
    ├── LocalStackError            the stack is already up, not up, or a part did not start or stop
    ├── StackBusyError             another `gco local up` holds the state directory
    ├── StateFileError             a state file is not one gco wrote (corrupt, truncated, hostile pids)
    ├── LlamaBuildError            the build or install of llama-cpp-python failed (names its log)
    ├── SetupError                 a step of the Makefile's set-up failed (`llama/setup_env.py`; names it)
    ├── EngineNotReadyError        the CPU engine's warm-up decoded no token: it must not report ready
    ├── DemoStepError              a walk-through step did not end as it should
    ├── NginxError                 nginx refused the adapted configuration, or did not start (`nginx.py`)
    ├── PolicyDeniedError          no NetworkPolicy admits a connection to a Service's engines (`services.py`)
    ├── RequestBodyError           a request to the local moto server whose body is not as its headers say
    ├── AssemblyError              a cloud assembly gco cannot read (no manifest; a stack or asset missing)
    ├── FunctionInvokeError        a function run from its asset failed: its error, a timeout, a crash
    ├── StateError                 a state of a local Step Functions execution failed (`assembly/states.py`)
    ├── TaskTokenError             a callback on a local Step Functions task token: unknown, or task closed
    └── ExecutionWaitError         a wait on a local Step Functions execution: unknown, or still running

A bad argument (a Region, a state directory that cannot be written) is a `GcoInputError` (exit 2).
"""

from __future__ import annotations

from gco.errors import GcoError


class LocalError(GcoError):
    """Root of the local stack's errors."""


class LocalStackError(LocalError):
    """The local stack is already up, not up, or a part failed to start."""


class StackBusyError(LocalError):
    """Another `gco local up` holds the state directory."""


class StateFileError(LocalError):
    """A state file is not one gco wrote: unreadable, truncated, or naming pids gco cannot have started."""


class LlamaBuildError(LocalError):
    """The build or install of llama-cpp-python failed; the message names the step and its log."""


class SetupError(LocalError):
    """A step of the Makefile's set-up (`python -m gco.local.llama.setup_env`) failed; the message names
    each failed step."""


class EngineNotReadyError(LocalError):
    """The warm-up completion produced no token: the engine must not report itself ready."""


class DemoStepError(LocalError):
    """A walk-through step exited with an unexpected status."""


class NginxError(LocalError):
    """nginx refused the adapted configuration, or could not be started."""


class PolicyDeniedError(LocalError):
    """The NetworkPolicies of a Service's namespace admit the source to none of its ready engines."""


class RequestBodyError(LocalError):
    """A request to the local moto server whose body cannot be read as its headers describe it (a
    `Content-Length` that is not a number, or a body cut short): answered 400, connection closed."""


class AssemblyError(LocalError):
    """A cloud assembly (`cdk synth`'s output) that cannot be read as gco's: no manifest, a stack or an
    asset it names missing, a function whose code or handler is not where its template says."""


class FunctionInvokeError(LocalError):
    """An invocation of a function run from its asset failed, as Lambda reports it: `error_type` is the
    handler's exception name, Runtime.ImportModuleError, Sandbox.Timedout or Runtime.ExitError."""

    def __init__(self, error_type: str, message: str) -> None:
        self.error_type = error_type
        super().__init__(f"{error_type}: {message}")


class StateError(LocalError):
    """A state's error in a local Step Functions execution, as Step Functions names it (`error`,
    `States.Runtime` or a function's error type) with its `cause`; a Catch or Retry matches the name."""

    def __init__(self, error: str, cause: str) -> None:
        super().__init__(f"{error}: {cause}")
        self.error = error
        self.cause = cause


class TaskTokenError(LocalError):
    """A callback (success, failure, heartbeat) on a task token of a local Step Functions execution
    that cannot be taken: `code` is the error the Step Functions API answers with (`TaskDoesNotExist`
    for a token no task was given, `TaskTimedOut` for one whose task has closed)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ExecutionWaitError(LocalError):
    """A wait on an execution of the local Step Functions stand-in (`assembly/stepfunctions.py`) found
    no execution of that ARN, or the execution was still running when the wait's timeout passed."""
