"""The runner's start against moto S3 and a Step Functions stand-in: the answer to the start message
(sent again when throttled, never when the task closed) and the wait for the job message."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from gco.local.moto.motoserver import MotoServer
from gpu_runner.runner import RunnerError
from gpu_runner.start import ANSWER_ATTEMPTS, announce, await_message, start
from tests.functional.gpu_runner.conftest import BUCKET, RUNNER, clients, make_bucket, rounds_job

KEY = "jobs/exec-1.json"


class AnsweringSfn:
    """Stands in for Step Functions' SendTaskSuccess: answers each call with the next of `errors` (an
    error code, or None for success; success once they run out) and, like RunJob after AwaitRunner
    succeeds, writes the job message when a start is accepted. It models nothing else of the service."""

    def __init__(self, s3: Any, errors: list[str | None]) -> None:
        self.s3, self.errors = s3, list(errors)
        self.answers: list[dict[str, Any]] = []

    def send_task_success(self, *, taskToken: str, output: str) -> None:  # noqa: N803 (boto's names)
        self.answers.append({"token": taskToken, "output": json.loads(output)})
        code = self.errors.pop(0) if self.errors else None
        if code is not None:
            raise ClientError({"Error": {"Code": code, "Message": code}}, "SendTaskSuccess")
        _write(self.s3, "tok-run", {"job": rounds_job(), "started": json.loads(output)})


def _write(s3: Any, token: str, state: dict[str, Any]) -> None:
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=f"{token} exec-1 {json.dumps(state)}".encode())


def _s3(moto: MotoServer) -> Any:
    s3 = clients(moto)["s3"]
    make_bucket(s3)
    return s3


def test_the_start_is_answered_then_the_job_message_is_run(moto: MotoServer) -> None:
    s3 = _s3(moto)
    _write(s3, "tok-start", {"job": rounds_job()})
    sfn = AnsweringSfn(s3, ["ThrottlingException"])  # throttled once, then accepted
    message = start(s3, sfn, BUCKET, KEY, runner=RUNNER, wait=5.0, poll=0.01, sleep=lambda _: None)
    assert message is not None and (message.phase, message.task_token) == ("run", "tok-run")
    assert [a["token"] for a in sfn.answers] == ["tok-start", "tok-start"]
    assert sfn.answers[-1]["output"] == {"runner": RUNNER}


def test_a_start_refused_because_the_task_closed_runs_nothing(moto: MotoServer) -> None:
    s3 = _s3(moto)
    _write(s3, "tok-start", {"job": rounds_job()})
    sfn = AnsweringSfn(s3, ["TaskTimedOut"])
    assert start(s3, sfn, BUCKET, KEY, runner=RUNNER, wait=5.0, poll=0.01, sleep=lambda _: None) is None
    assert len(sfn.answers) == 1  # a closed task is not asked again


def test_an_answer_that_never_goes_through_is_an_error_naming_the_reason(moto: MotoServer) -> None:
    s3 = _s3(moto)
    _write(s3, "tok-start", {"job": rounds_job()})
    message = await_message(s3, BUCKET, KEY, wait=1.0)
    sfn = AnsweringSfn(s3, ["ServiceUnavailable"] * ANSWER_ATTEMPTS)
    with pytest.raises(RunnerError, match="cannot answer the start message of exec-1: ServiceUnavailable"):
        announce(message, sfn=sfn, runner=RUNNER, sleep=lambda _: None)
    assert len(sfn.answers) == ANSWER_ATTEMPTS


def test_a_runner_restarted_after_its_start_runs_the_job_message(moto: MotoServer) -> None:
    s3 = _s3(moto)
    _write(s3, "tok-run", {"job": rounds_job(), "started": {"runner": RUNNER}})
    sfn = AnsweringSfn(s3, [])
    message = start(s3, sfn, BUCKET, KEY, runner=RUNNER, wait=1.0, poll=0.01, sleep=lambda _: None)
    assert message is not None and message.task_token == "tok-run" and sfn.answers == []


def test_the_wait_for_a_message_ends_at_its_bound(moto: MotoServer) -> None:
    s3 = _s3(moto)
    _write(s3, "tok-start", {"job": rounds_job()})
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(RunnerError, match="holds no exec-1 job message yet"):
        await_message(
            s3, BUCKET, KEY, wait=10.0, poll=4.0, accept=lambda m: m.phase == "run",
            clock=lambda: now[0], sleep=sleep,
        )  # fmt: skip
    assert now[0] == 12.0  # read at 0, 4, 8 and 12 s: past the bound, no later read
