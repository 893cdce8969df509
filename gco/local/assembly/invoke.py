"""A Lambda function run from its asset folder, as Lambda runs it: the local stack's stand-in for the
Lambda service's invoke.

Each execution environment is a child process of the function's runtime's Python (the runtime's X.Y:
`gco.processes.cpython`) running `bootstrap.py` with `-I -S`: its import path is the asset folder and a
folder standing in for the runtime's own packages (`FunctionRuntime.packages`: the AWS SDK), so
nothing of the source tree or of gco's virtual environment can be imported. Its environment is the
template's `Environment` (resolved by the caller against the local stack) with what Lambda itself
sets (`AWS_REGION`, `AWS_LAMBDA_FUNCTION_NAME`, `LAMBDA_TASK_ROOT`, `_HANDLER`, ...) and the
credentials the caller gives (the function's role's).

- Concurrency: at most `concurrency` invocations at once (the function's reserved concurrency), each
  in an environment of its own ("For each concurrent request, Lambda provisions a separate instance
  of your execution environment": docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html); an
  idle environment is reused (a warm start), a new one started when none is idle.
- Timeout: an invocation that has not answered within the function's `Timeout` is ended, and its
  environment with it; the caller gets Sandbox.Timedout ("Task timed out after N seconds", as
  Lambda reports it) and the next invocation starts a fresh environment.
- Errors: the handler's exception comes back as its type and message (`FunctionInvokeError`), an
  import that failed as Runtime.ImportModuleError, an environment that died as Runtime.ExitError.

What it does not model: memory and the CPU share that follows it, the 6 MB payload limit, freezing an
idle environment, recycling environments after hours, and Lambda's throttling (an invocation over the
concurrency waits here; Lambda refuses it with `TooManyRequestsException`).

The one adaptation of the environment: `AWS_ENDPOINT_URL` points the function's AWS SDK at the local
moto server, which stands in for every AWS service it calls.
"""

from __future__ import annotations

import json
import select
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from gco.env import AWS_REGION_ENV, DEFAULT_REGION_ENV
from gco.local.assembly.template import LambdaFunction
from gco.local.errors import AssemblyError, FunctionInvokeError
from gco.processes.cpython import find_cpython

BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
ACCOUNT = "123456789012"  # moto's default account, in the function's ARN


@dataclass(frozen=True)
class FunctionRuntime:
    """The Lambda runtime as the local stack stands it in: its Python and its own packages."""

    interpreter: str
    packages: Path

    @staticmethod
    def find(runtime: str) -> str | None:
        """The CPython of a Lambda runtime name ("python3.13") on this machine, or None."""
        return find_cpython(runtime.removeprefix("python")) if runtime.startswith("python") else None

    @classmethod
    def for_runtime(cls, runtime: str, packages: Path) -> FunctionRuntime:
        """The CPython of a Lambda runtime name ("python3.13") on this machine.

        Raises:
            AssemblyError: the runtime is not CPython, or this machine has no such Python.
        """
        interpreter = cls.find(runtime)
        if interpreter is None:
            raise AssemblyError(f"no Python for the Lambda runtime {runtime!r} here (its wheels need it)")
        return cls(interpreter, packages)


class _Environment:
    """One execution environment: a bootstrap child with its pipes."""

    def __init__(self, command: list[str], env: Mapping[str, str], log: IO[str] | int) -> None:
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=dict(env), text=True
        )

    def ask(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """Send one invocation and wait for its answer; None when none came in time or it died."""
        stdin, stdout = self.process.stdin, self.process.stdout
        if stdin is None or stdout is None:
            return None
        try:
            stdin.write(json.dumps(request) + "\n")
            stdin.flush()
        except BrokenPipeError:
            return None
        ready, _, _ = select.select([stdout], [], [], timeout_s)
        line = stdout.readline() if ready else ""
        return json.loads(line) if line else None

    def end(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


class AssetFunction:
    """Invoke one function of the assembly from its asset (see the module's docstring).

    Parameters:
        environment: the function's variables, its template's resolved, and its role's credentials.
        region: the Region it runs in.
        concurrency: the most invocations at once (its reserved concurrency; default 10).
        log: where its environments' stderr goes (the function's log).
    """

    def __init__(
        self,
        function: LambdaFunction,
        runtime: FunctionRuntime,
        *,
        environment: Mapping[str, str],
        region: str,
        concurrency: int | None = None,
        log: IO[str] | int = subprocess.DEVNULL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if function.code is None:
            raise AssemblyError(f"{function.logical_id}: inline code is not run from an asset")
        self.function = function
        self.runtime = runtime
        self.region = region
        self.name = function.name if isinstance(function.name, str) else function.logical_id
        self.concurrency = concurrency or function.reserved_concurrency or 10
        self.environment = {**self._lambda_variables(function.code), **environment}
        self.log = log
        self.clock = clock
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self._idle: list[_Environment] = []
        self._lock = threading.Lock()
        self.started = 0  # environments started (cold starts)

    def _lambda_variables(self, code: Path) -> dict[str, str]:
        """What Lambda sets in every environment ("Defined runtime environment variables")."""
        return {
            AWS_REGION_ENV: self.region,
            DEFAULT_REGION_ENV: self.region,
            "AWS_LAMBDA_FUNCTION_NAME": self.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.function.memory_mb),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{self.function.runtime}",
            "LAMBDA_TASK_ROOT": str(code),
            "LAMBDA_RUNTIME_DIR": str(self.runtime.packages),
            "_HANDLER": self.function.handler,
            "TZ": ":UTC",
            "LANG": "en_US.UTF-8",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
        }

    @property
    def arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{ACCOUNT}:function:{self.name}"

    def invoke(self, event: Any) -> Any:
        """The handler's answer to `event`, in an idle environment or a new one.

        Raises:
            FunctionInvokeError: the handler raised, the import failed, it timed out or its environment died.
        """
        with self._slots:
            environment = self._take()
            deadline = self.clock() + self.function.timeout_s
            request = {
                "event": event,
                "request_id": str(uuid.uuid4()),
                "deadline_ms": int(deadline * 1000),
                "function": {"name": self.name, "arn": self.arn, "memory_mb": self.function.memory_mb},
            }
            answer = environment.ask(request, self.function.timeout_s)
            if answer is None:
                timed_out = environment.process.poll() is None
                environment.end()
                if timed_out:
                    message = f"Task timed out after {self.function.timeout_s:.2f} seconds"
                    raise FunctionInvokeError("Sandbox.Timedout", message)
                raise FunctionInvokeError(
                    "Runtime.ExitError", f"exit status {environment.process.returncode}"
                )
            with self._lock:
                self._idle.append(environment)
        if "errorType" in answer:
            raise FunctionInvokeError(str(answer["errorType"]), str(answer.get("errorMessage", "")))
        return answer.get("result")

    def _take(self) -> _Environment:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            self.started += 1
        command = [
            *(self.runtime.interpreter, "-I", "-S", str(BOOTSTRAP)),
            *(str(self.function.code), str(self.runtime.packages), self.function.handler),
        ]
        return _Environment(command, self.environment, self.log)

    def close(self) -> None:
        """End every idle environment (call when no invocation is in flight)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for environment in idle:
            environment.end()

    def __enter__(self) -> AssetFunction:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def credentials_environment(access_key: str, secret_key: str, session_token: str | None) -> dict[str, str]:
    """The variables through which Lambda hands a function its role's credentials."""
    found = {"AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": secret_key}
    if session_token:
        found["AWS_SESSION_TOKEN"] = session_token
    return found
