"""The runner's start: wait for a message at the job key, answer the start message, wait for the job.

The state machine first writes a start message and waits at most the queue timeout for the runner to
answer it (AwaitRunner in stacks/constructs/runner_workflow.py): that bounds the wait for a GPU instance, its
boot and the image pull. The runner answers with task success as soon as it has read it; then the
state machine writes the job message, with a new task token, to the same key (S3 reads are strongly
consistent after a write: the next read sees it), and the runner runs that job. A start message the
runner answers too late is refused (the task timed out): the runner runs nothing and exits.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from gpu_runner.job import JobMessage
from gpu_runner.runner import CLOSED_TASK, JobError, RunnerError, read_job

LOG = logging.getLogger("gpu_runner")
POLL_SECONDS = 2.0
ANSWER_ATTEMPTS = 3  # a throttled or lost answer is sent again; the queue timeout bounds it anyway


def await_message(
    s3: Any,
    bucket: str,
    key: str,
    *,
    wait: float,
    accept: Callable[[JobMessage], bool] = lambda _: True,
    poll: float = POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> JobMessage:
    """The first message at s3://bucket/key that `accept` takes, read every `poll` seconds for `wait`.

    Raises:
        JobError: the message is malformed (no wait helps).
        RunnerError: no message was taken within `wait` (the last reason).
    """
    deadline = clock() + wait
    while True:
        try:
            message = read_job(s3, bucket, key)
            if accept(message):
                return message
            problem = RunnerError(f"s3://{bucket}/{key} holds no {message.execution} job message yet")
        except JobError:
            raise
        except RunnerError as error:
            problem = error
        if clock() > deadline:
            raise problem
        sleep(poll)


def announce(
    message: JobMessage, *, sfn: Any, runner: str, sleep: Callable[[float], None] = time.sleep
) -> bool:
    """Answer the start message: this runner is up. False when Step Functions no longer waits for it
    (the queue timeout passed, or the execution ended): nothing may run.

    Raises:
        RunnerError: Step Functions could not be reached in `ANSWER_ATTEMPTS` tries.
    """
    reason = ""
    for attempt in range(1, ANSWER_ATTEMPTS + 1):
        try:
            sfn.send_task_success(taskToken=message.task_token, output=json.dumps({"runner": runner}))
            return True
        except ClientError as error:
            reason = str(error.response.get("Error", {}).get("Code"))
            if reason in CLOSED_TASK:
                LOG.warning("start refused (%s): the execution no longer waits for this runner", reason)
                return False
        except BotoCoreError as error:
            reason = type(error).__name__
        if attempt < ANSWER_ATTEMPTS:
            sleep(POLL_SECONDS * attempt)
    raise RunnerError(f"cannot answer the start message of {message.execution}: {reason}")


def start(
    s3: Any,
    sfn: Any,
    bucket: str,
    key: str,
    *,
    runner: str,
    wait: float,
    poll: float = POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> JobMessage | None:
    """The job to run: the start message answered, then the job message read; None when the start was
    refused. A job message found first (this runner restarted after answering) is returned as is.

    Raises:
        JobError, RunnerError: as `await_message` and `announce`.
    """
    first = await_message(s3, bucket, key, wait=wait, poll=poll, sleep=sleep)
    if first.phase == "run":
        return first
    if not announce(first, sfn=sfn, runner=runner, sleep=sleep):
        return None
    return await_message(
        s3, bucket, key, wait=wait, poll=poll, sleep=sleep, accept=lambda m: m.phase == "run"
    )
