"""The GPU runner's `matrix` job against the moto server and the local stack: the real `gco matrix`
runs as the job, with heartbeats, the run directory and evidence uploaded, and the task answered."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gco import aws
from gco.endpoints import EndpointStore
from gco.evidence import validate
from gco.local.moto.motoserver import MotoServer
from gpu_runner import JobMessage, MatrixJob, run_job
from gpu_runner.runner import subprocess_executor
from tests.functional.gpu_runner.test_runner import RecordingSfn
from tests.functional.validation.conftest import StackFactory, assert_nothing_left, stack_environment
from tests.unit.validation.sample import SETTINGS, settings

BUCKET = "gco-evidence-matrix"
# Two instances (aws:userid role-id:instance-id): the run, and the later job that resumes it.
FIRST_RUNNER = "AROAEXAMPLE:i-0aaaaaaaaaaaaaaa1"
LATER_RUNNER = "AROAEXAMPLE:i-0bbbbbbbbbbbbbbb2"
GCO = str(Path(sys.executable).with_name("gco"))


def local_gco(argv: list[str], cancel: threading.Event) -> tuple[int, str, str]:
    """The runner's executor, with `gco` from this environment (the container has it on its PATH)."""
    return subprocess_executor([GCO, *argv[1:]], cancel)


def message(execution: str, **job: Any) -> JobMessage:
    return JobMessage.model_validate(
        {"task_token": "tok", "execution": execution, "job": {"kind": "matrix", **job}}
    )


def test_matrix_job_command_lines(tmp_path: Path) -> None:
    job = MatrixJob(settings=SETTINGS)
    uri = f"s3://{BUCKET}/runs/exec-2/{LATER_RUNNER}/"
    argv = job.argv(tmp_path / "in", tmp_path / "run", BUCKET, uri)
    assert argv[:3] == ["gco", "matrix", "run"] and "--consent" in argv
    assert argv[argv.index("--evidence-bucket") + 1] == BUCKET and argv[-2:] == ["--output", "json"]
    assert argv[argv.index("--run-uri") + 1] == uri
    assert json.loads((tmp_path / "in" / "settings.json").read_text()) == SETTINGS
    resumed = MatrixJob(settings=SETTINGS, resume_execution="exec-1").argv(
        tmp_path / "in", tmp_path / "run", BUCKET, uri
    )
    assert resumed[:4] == ["gco", "matrix", "resume", str(tmp_path / "run")]
    assert resumed[resumed.index("--settings") + 1] == str(tmp_path / "in" / "settings.json")
    for bad in (
        {"settings": SETTINGS, "resume_execution": "../x"},
        {"settings": SETTINGS, "script": "x"},
        {},
    ):
        with pytest.raises(ValidationError):
            message("e", **bad)


@pytest.mark.slow
def test_a_matrix_job_succeeds_with_heartbeats_and_its_evidence_in_s3(
    make_stack: StackFactory,
    store: EndpointStore,
    moto: MotoServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = make_stack()
    stack_environment(stack, monkeypatch)
    s3 = aws.client("s3", endpoint_url=moto.url)
    s3.create_bucket(Bucket=BUCKET)
    sfn = RecordingSfn()
    outcome = run_job(
        message("mx-ok", settings=SETTINGS),
        sfn=sfn,
        s3=s3,
        bucket=BUCKET,
        workdir=tmp_path / "first",
        runner=FIRST_RUNNER,
        execute=local_gco,
        heartbeat_interval=0.2,
        sweep_engines=list,
    )
    assert outcome.succeeded, outcome.output
    kinds = [kind for kind, _ in sfn.calls]
    assert kinds[-1] == "success" and kinds.count("heartbeat") >= 3  # one at start, then while it ran
    output = json.loads(sfn.calls[-1][1]["output"])
    assert (
        output["kind"] == "matrix"
        and output["summary"].startswith("matrix ")
        and " PASS " in output["summary"]
    )
    key = f"evidence/{output['evidence_id']}.json"
    assert output["evidence"] == f"s3://{BUCKET}/{key}"
    record = validate(json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()))
    assert (record.kind, record.claim_class, record.data["verdict"]) == ("matrix", "observed", "pass")
    uploaded = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="runs/mx-ok/")["Contents"]}
    assert f"runs/mx-ok/{FIRST_RUNNER}/matrix/checkpoint.json" in uploaded
    assert_nothing_left(stack, store, record.data["run_id"])

    # A later job, on another instance, resumes that run directory from the earlier runner's folder:
    # already finished, nothing redeployed.
    again = run_job(
        message("mx-again", settings=SETTINGS, resume_execution="mx-ok"),
        sfn=RecordingSfn(),
        s3=s3,
        bucket=BUCKET,
        workdir=tmp_path / "second",
        runner=LATER_RUNNER,
        execute=local_gco,
        sweep_engines=list,
    )
    assert again.succeeded, again.output
    assert store.list(consistent_read=True) == []
    resumed = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"runs/mx-again/{LATER_RUNNER}/matrix/")["Contents"]
    assert f"runs/mx-again/{LATER_RUNNER}/matrix/checkpoint.json" in {o["Key"] for o in resumed}


def test_a_failing_matrix_job_answers_the_failure_naming_the_field(
    moto: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3 = aws.client("s3", endpoint_url=moto.url)
    s3.create_bucket(Bucket=BUCKET)
    sfn = RecordingSfn()
    outcome = run_job(
        message("mx-bad", settings=settings(hpa_min_replicas=1)),
        sfn=sfn,
        s3=s3,
        bucket=BUCKET,
        workdir=tmp_path,
        runner=FIRST_RUNNER,
        execute=local_gco,
        heartbeat_interval=0.2,
        sweep_engines=list,
    )
    assert not outcome.succeeded
    kind, call = sfn.calls[-1]
    assert kind == "failure" and call["error"] == "RunnerJobFailed"
    cause = json.loads(call["cause"])
    assert cause["exit_status"] == 2
    assert cause["message"] == "error: hpa_min_replicas: must be 2 (the HPA must hold exactly two replicas)"
    missing = run_job(
        message("mx-none", settings=SETTINGS, resume_execution="never-ran"),
        sfn=sfn,
        s3=s3,
        bucket=BUCKET,
        workdir=tmp_path / "none",
        runner=FIRST_RUNNER,
        execute=local_gco,
        sweep_engines=list,
    )
    assert not missing.succeeded
    assert (
        "runs/never-ran/ holds no run directory to resume" in json.loads(sfn.calls[-1][1]["cause"])["message"]
    )
