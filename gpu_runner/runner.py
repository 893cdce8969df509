"""Run one job: heartbeats while it runs, evidence and run directory to S3, the task answered.

The first heartbeat goes at job start, before the job runs (the job message was written once this
runner answered the start message, `gpu_runner.start`); then one every `heartbeat_interval`
seconds. When Step Functions refuses one (the execution was
aborted, timed out, or its heartbeat timeout passed), the job's process group is stopped and the
runner answers nothing more. A heartbeat that is throttled or lost on the network is not a refusal:
the next one is sent on time, and the task's heartbeat timeout bounds how long that may go on.
After the job, engine containers still running (their wrapper died) are killed and named in the answer.
A matrix run that did not finish (killed, cancelled because its task closed, or failed mid-way) is
followed by `gco matrix destroy` of its run directory, so its GPU endpoints do not outlive it; a
refused start (exit status 2: bad settings, a changed identity) deployed nothing and is not.
Whatever happens, the caller (`__main__`) exits, and the instance's user data shuts the instance
down, which terminates it.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from gco.validation.checkpoint import read_checkpoint
from gco.validation.errors import CheckpointError
from gco.validation.mirror import MirrorError, fetch_run
from gpu_runner import docker
from gpu_runner.job import JobMessage, MatrixJob

CAUSE_LIMIT = 32_000
STOP_TIMEOUT = 30.0
BAD_INPUT = 2  # the `gco` exit status of refused input: nothing was started
WATCH_INTERVAL = 0.1  # how often the job's watcher looks for a cancellation
# Step Functions' answers for a task that no longer waits: no later heartbeat can succeed.
CLOSED_TASK = frozenset({"TaskTimedOut", "TaskDoesNotExist", "InvalidToken"})
LOG = logging.getLogger("gpu_runner")
# S3's answers to a conditional create whose key exists (412), or is being written meanwhile (409).
EXISTS = ("PreconditionFailed", "ConditionalRequestConflict")
# A run's files go to runs/<execution>/<runner id>/, the runner id being the caller's `aws:userid`
# (`<role id>:<instance id>` for an instance role: every execution launches its own instance). The
# instance role may create objects only under its own id (stacks/runner.py names the variable), so
# a runner can add to no other run's files, and replace none, its own included.
RUNS_PREFIX = "runs/"
RUNNER_ID_VARIABLE = "${aws:userid}"


class RunnerError(Exception):
    """The runner could not read its job or reach Step Functions.

    RunnerError
    └── JobError    the job message exists but is malformed (no retry helps)
    """


class JobError(RunnerError):
    """The job message is malformed."""


@dataclass(frozen=True)
class Outcome:
    """What the runner told Step Functions: succeeded or not, and the task output or cause."""

    succeeded: bool
    output: dict[str, Any]
    cancelled: bool = False


Executor = Callable[[list[str], threading.Event], "tuple[int, str, str]"]


def subprocess_executor(argv: list[str], cancel: threading.Event) -> tuple[int, str, str]:
    """Run argv in its own process group; on cancel, SIGTERM the group, then SIGKILL."""
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    finished = threading.Event()
    watcher = threading.Thread(target=_stop_on_cancel, args=(process, cancel, finished), daemon=True)
    watcher.start()
    stdout, stderr = process.communicate()
    # Release the watcher with an event of its own: setting the caller's `cancel` here would make
    # every failed job look cancelled (run_job answers nothing for a cancelled job).
    finished.set()
    watcher.join()
    return process.returncode, stdout, stderr


def _stop_on_cancel(
    process: subprocess.Popen[str], cancel: threading.Event, finished: threading.Event
) -> None:
    while not cancel.wait(WATCH_INTERVAL):
        if finished.is_set():
            return
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


def read_job(s3: Any, bucket: str, key: str) -> JobMessage:
    """The job message at s3://bucket/key, validated."""
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as error:
        raise RunnerError(f"cannot read s3://{bucket}/{key}: {error.response['Error'].get('Code')}") from None
    try:
        return JobMessage.from_wire(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise JobError(
            f"s3://{bucket}/{key} is not a valid job message: {str(error).splitlines()[0]}"
        ) from None


def run_prefix(execution: str, runner_id: str) -> str:
    """The key prefix of one runner's files of one execution."""
    return f"{RUNS_PREFIX}{execution}/{runner_id}/"


def runner_id(sts: Any) -> str:
    """This runner's `aws:userid` (STS GetCallerIdentity needs no permission).

    Raises:
        RunnerError: STS could not be reached.
    """
    try:
        return str(sts.get_caller_identity()["UserId"])
    except (ClientError, BotoCoreError) as error:
        raise RunnerError(f"cannot tell this runner's identity: {error}") from None


def upload_dir(s3: Any, bucket: str, prefix: str, directory: Path) -> list[str]:
    """Every file under `directory` to `prefix`, each created once; returns the keys written.

    Each file is one PUT with If-None-Match (the instance role may only create objects: S3 refuses
    a replacement with 412). A key that already exists (an earlier attempt of the same execution
    wrote it) is kept as it is and logged, not returned.
    """
    keys = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and not p.is_symlink()):
        key = prefix + path.relative_to(directory).as_posix()
        with path.open("rb") as body:
            try:
                s3.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") not in EXISTS:
                    raise
                LOG.warning("s3://%s/%s exists already: kept, not replaced", bucket, key)
                continue
        keys.append(key)
    return keys


def download_dir(s3: Any, bucket: str, prefix: str, directory: Path) -> list[str]:
    """Every object under `prefix` into `directory` (a resumed job's earlier run directory).

    The copy is the matrix's own (`gco.validation.mirror.fetch_run`): a folder holding only the
    checkpoint revisions a lost runner mirrored is a run directory too.

    Raises:
        JobError: nothing is stored under `prefix`, a key would land outside `directory`, or S3 failed.
    """
    try:
        return fetch_run(f"s3://{bucket}/{prefix}", directory, client=s3)
    except (CheckpointError, MirrorError) as error:
        raise JobError(f"cannot copy the run directory to resume: {error}") from None


def earlier_run_prefix(s3: Any, bucket: str, execution: str) -> str:
    """The run directory an earlier execution's runner uploaded: `runs/<execution>/<its runner id>/`.

    Each runner writes under its own id (`run_prefix`), and a resumed job runs on another instance,
    so the folder is found by listing, not by this runner's id.

    Raises:
        JobError: the execution has no runner folder, or several (which one to resume would be a guess).
    """
    prefix = f"{RUNS_PREFIX}{execution}/"
    folders = [
        common["Prefix"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/")
        for common in page.get("CommonPrefixes", [])
    ]
    if not folders:
        raise JobError(f"s3://{bucket}/{prefix} holds no run directory to resume")
    if len(folders) > 1:
        raise JobError(
            f"s3://{bucket}/{prefix} holds {len(folders)} runners' directories: {', '.join(folders)}"
        )
    return str(folders[0])


def _restore(s3: Any, bucket: str, execution: str | None, run_dir: Path) -> tuple[int, str, str] | None:
    """Copy a resumed execution's run directory; None when done (or nothing to resume), else the failure."""
    if execution is None:
        return None
    try:
        download_dir(s3, bucket, earlier_run_prefix(s3, bucket, execution), run_dir)
    except JobError as error:
        return 1, "", str(error)
    return None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:CAUSE_LIMIT] if lines else ""


def run_job(
    message: JobMessage,
    *,
    sfn: Any,
    s3: Any,
    bucket: str,
    workdir: Path,
    runner: str,
    execute: Executor = subprocess_executor,
    heartbeat_interval: float = 60.0,
    sweep_engines: Callable[[], list[str]] = docker.sweep,
) -> Outcome:
    """Run the job and answer its task token. Returns what was answered.

    Raises:
        RunnerError: Step Functions refused the final answer for a reason other than a closed task.
    """
    if not _beat(sfn, message.task_token, heartbeat_interval):
        return Outcome(succeeded=False, output={"error": "TaskClosed"}, cancelled=True)
    cancel, done = threading.Event(), threading.Event()
    heartbeats = threading.Thread(
        target=_heartbeat, args=(sfn, message.task_token, heartbeat_interval, cancel, done), daemon=True
    )
    heartbeats.start()
    run_dir = workdir / "run"
    runs_prefix = run_prefix(message.execution, runner)
    run_uri = f"s3://{bucket}/{runs_prefix}"
    resumed = getattr(message.job, "resume_execution", None)
    try:
        rc, stdout, stderr = _restore(s3, bucket, resumed, run_dir) or execute(
            message.job.argv(workdir / "input", run_dir, bucket, run_uri), cancel
        )
    finally:
        done.set()
        heartbeats.join()
    destroyed = _destroy_unfinished(message, rc, run_dir, run_uri, execute)
    survivors = sweep_engines()
    uploaded = upload_dir(s3, bucket, runs_prefix, run_dir) if run_dir.is_dir() else []
    if cancel.is_set() and rc != 0:
        return Outcome(
            succeeded=False, output={"error": "TaskClosed", "destroyed": destroyed}, cancelled=True
        )
    if rc == 0:
        result = json.loads(stdout or "{}")
        evidence_id = result.get("evidence_id")
        output = {
            "kind": message.job.kind,
            "evidence_id": evidence_id,
            "evidence": f"s3://{bucket}/evidence/{evidence_id}.json" if evidence_id else None,
            "run_dir": run_uri,
            "files": len(uploaded),
            "summary": (result.get("summary") or {}).get("line"),
            "engine_survivors": survivors,
        }
        _answer(sfn.send_task_success, taskToken=message.task_token, output=json.dumps(output))
        return Outcome(succeeded=True, output=output)
    cause = json.dumps(
        {
            "exit_status": rc,
            "message": _last_line(stderr),
            "run_dir": run_uri,
            "engine_survivors": survivors,
            "destroyed": destroyed,
        }
    )
    _answer(sfn.send_task_failure, taskToken=message.task_token, error="RunnerJobFailed", cause=cause)
    return Outcome(succeeded=False, output=json.loads(cause))


def _destroy_unfinished(
    message: JobMessage, rc: int, run_dir: Path, run_uri: str, execute: Executor
) -> dict[str, Any] | None:
    """Run `gco matrix destroy` after a matrix job that left its run unfinished; None when not needed.

    Its own cancel event: the job's may be set (the task closed), and the destruction must run then too.
    """
    if not isinstance(message.job, MatrixJob) or rc in (0, BAD_INPUT):
        return None
    try:
        if read_checkpoint(run_dir).finished:
            return None  # the run destroyed its endpoints and wrote its verdict itself
    except CheckpointError:
        return None  # never started: nothing deployed
    status, stdout, stderr = execute(MatrixJob.destroy_argv(run_dir, run_uri), threading.Event())
    LOG.warning("matrix run unfinished (exit status %s): gco matrix destroy exited %s", rc, status)
    return {"exit_status": status, "message": _last_line(stderr) or _last_line(stdout)}


def _heartbeat(sfn: Any, token: str, interval: float, cancel: threading.Event, done: threading.Event) -> None:
    while not done.wait(interval):
        if not _beat(sfn, token, interval):
            cancel.set()
            return


def _beat(sfn: Any, token: str, interval: float) -> bool:
    """One heartbeat; False when Step Functions says the task is closed (no later one can succeed)."""
    try:
        sfn.send_task_heartbeat(taskToken=token)
    except ClientError as error:
        code = error.response["Error"].get("Code")
        if code in CLOSED_TASK:
            LOG.warning("heartbeat refused (%s): stopping the job", code)
            return False
        LOG.warning("heartbeat not accepted (%s); the next one follows in %.0f s", code, interval)
    except BotoCoreError as error:
        LOG.warning("heartbeat not sent (%s); the next one follows in %.0f s", type(error).__name__, interval)
    return True


def _answer(call: Callable[..., Any], **kwargs: Any) -> None:
    try:
        call(**kwargs)
    except ClientError as error:
        if error.response["Error"].get("Code") in ("TaskTimedOut", "TaskDoesNotExist"):
            return  # the execution already moved on (aborted or timed out): nothing to answer
        raise RunnerError(
            f"Step Functions refused the answer: {error.response['Error'].get('Code')}"
        ) from None
