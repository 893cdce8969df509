"""The Lambda runtime's side of one execution environment, run as a script in the function's child.

Started as `python -I -S bootstrap.py TASK_ROOT RUNTIME_PACKAGES HANDLER` (no site-packages, no
PYTHONPATH, no user site): its import path is the function's asset folder, then a folder standing in
for the runtime's own packages (the AWS SDK), then the standard library, in the order Lambda's Python
runtime gives them ("Lambda runtimes", and the runtime's `sys.path`: /var/task, /opt/python,
the runtime's site-packages). It imports the handler once (an import error is reported as Lambda's
Runtime.ImportModuleError or Runtime.HandlerNotFound, and every invocation then fails with it),
then answers invocations: one JSON line in on stdin (`{"event", "request_id", "deadline_ms",
"function"}`), one JSON line out on the descriptor that was stdout (`{"result"}` or `{"errorType",
"errorMessage"}`), as the Runtime API's invocation/next and response or error calls would. The
handler's own prints and logs go to stderr, as Lambda sends them to the function's log.

It imports nothing of gco: nothing of the source tree may be on the function's path.
"""

import importlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any


class LambdaContext:
    """The context object of Lambda's Python runtime ("Using the Lambda context object to retrieve
    Python function information"): the attributes Powertools and gco's handlers read."""

    def __init__(self, request: dict[str, Any]) -> None:
        function = request["function"]
        self.function_name = function["name"]
        self.function_version = "$LATEST"
        self.invoked_function_arn = function["arn"]
        self.memory_limit_in_mb = int(function["memory_mb"])
        self.aws_request_id = request["request_id"]
        self.log_group_name = f"/aws/lambda/{function['name']}"
        self.log_stream_name = f"local/{os.getpid()}"
        self._deadline_ms = int(request["deadline_ms"])

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - int(time.time() * 1000))


def load(handler: str) -> Callable[[Any, Any], Any]:
    """The handler the template names (`module.attribute`), imported from the task root.

    Raises:
        RuntimeError: (Lambda's error type, its message) when the import fails or names nothing callable.
    """
    module_name, _, attribute = handler.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # Lambda: "Runtime.ImportModuleError: Unable to import module ..."
        raise RuntimeError(
            "Runtime.ImportModuleError", f"Unable to import module '{module_name}': {error}"
        ) from error
    function = getattr(module, attribute, None)
    if not callable(function):
        message = f"Handler '{attribute}' missing on module '{module_name}'"
        raise RuntimeError("Runtime.HandlerNotFound", message)
    return function  # type: ignore[no-any-return]


def main() -> None:
    task_root, runtime_packages, handler_name = sys.argv[1:4]
    sys.path[:0] = [task_root, runtime_packages]
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the handler's prints go to the log, not into the answers
    handler: Callable[[Any, Any], Any] | None = None
    failure: dict[str, str] | None = None
    try:
        handler = load(handler_name)
    except RuntimeError as error:
        failure = {"errorType": error.args[0], "errorMessage": error.args[1]}
    for line in sys.stdin:
        request = json.loads(line)
        if handler is None:
            answers.write(json.dumps(failure) + "\n")
            continue
        try:
            result = handler(request["event"], LambdaContext(request))
            answers.write(json.dumps({"result": result}) + "\n")
        except Exception as error:  # a function error: its type and message, the trace to the log
            traceback.print_exc()
            answers.write(json.dumps({"errorType": type(error).__name__, "errorMessage": str(error)}) + "\n")


if __name__ == "__main__":
    main()
