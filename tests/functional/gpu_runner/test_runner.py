"""The GPU runner entry point against a moto server: job parsing, uploads, answers, heartbeats."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gco import aws
from gco.local.moto.motoserver import MotoServer
from gpu_runner import JobError, JobMessage, RoundsJob, RunnerError, run_job
from gpu_runner.__main__ import main
from gpu_runner.runner import (
    earlier_run_prefix,
    read_job,
    run_prefix,
    runner_id,
    subprocess_executor,
    upload_dir,
)
from tests.functional.gpu_runner.conftest import BUCKET, RUNNER, FakeRounds, clients, make_bucket, rounds_job


def test_rounds_job_command_line(tmp_path: Path) -> None:
    job = RoundsJob.model_validate(rounds_job(ci_target=0.05, min_rounds=2, mode="load"))
    argv = job.argv(tmp_path / "in", tmp_path / "run", BUCKET, f"s3://{BUCKET}/runs/e/r/")
    assert argv[:3] == ["gco", "bench", "rounds"]
    assert argv[argv.index("--evidence-bucket") + 1] == BUCKET
    assert argv[argv.index("--engines") + 1] == "a,b"
    assert argv[argv.index("--ci-target") + 1] == "0.05"
    assert argv[argv.index("--mode") + 1] == "load"
    assert argv[-2:] == ["--serve-arg", "--max-tokens=8"]
    prompts = (tmp_path / "in" / "prompts.jsonl").read_text().splitlines()
    assert [json.loads(line)["prompt"] for line in prompts] == ["Say hello.", "Count to three."]
    assert json.loads((tmp_path / "in" / "manifest.json").read_text()) == {"engines": [], "workload": {}}


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"task_token": "", "execution": "e", "job": rounds_job()}, "task_token"),
        ({"task_token": "t", "execution": "../etc", "job": rounds_job()}, "execution"),
        ({"task_token": "t", "execution": "e", "job": rounds_job(kind="matrix")}, "job"),
        ({"task_token": "t", "execution": "e", "job": rounds_job(prompts=[])}, "prompts"),
        ({"task_token": "t", "execution": "e", "job": rounds_job(script="rm -rf /")}, "script"),
    ],
)
def test_bad_job_messages_are_refused(message: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        JobMessage.model_validate(message)


def test_read_job_and_upload_dir(moto: MotoServer, tmp_path: Path) -> None:
    s3 = clients(moto)["s3"]
    make_bucket(s3)
    with pytest.raises(RunnerError, match=r"cannot read s3://gco-evidence-test/jobs/missing\.json"):
        read_job(s3, BUCKET, "jobs/missing.json")
    state = {"job": rounds_job(), "instance": {"InstanceIds": ["i-1"]}}
    s3.put_object(Bucket=BUCKET, Key="jobs/exec-1.json", Body=f"tok exec-1 {json.dumps(state)}")
    message = read_job(s3, BUCKET, "jobs/exec-1.json")
    assert (message.task_token, message.execution, message.instance_ids) == ("tok", "exec-1", ["i-1"])
    for bad in ("tok exec-1", "tok exec-1 [1]", "tok exec-1 {", "tok ../x {}"):
        s3.put_object(Bucket=BUCKET, Key="jobs/bad.json", Body=bad)
        with pytest.raises(
            JobError, match=r"^s3://gco-evidence-test/jobs/bad\.json is not a valid job message"
        ):
            read_job(s3, BUCKET, "jobs/bad.json")
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c.txt").write_text("c")
    (tmp_path / "top.json").write_text("{}")
    assert upload_dir(s3, BUCKET, "runs/x/", tmp_path) == ["runs/x/a/b/c.txt", "runs/x/top.json"]
    assert s3.get_object(Bucket=BUCKET, Key="runs/x/a/b/c.txt")["Body"].read() == b"c"
    # A second attempt of the same run creates what is new and replaces nothing.
    (tmp_path / "top.json").write_text('{"second": true}')
    (tmp_path / "later.txt").write_text("later")
    assert upload_dir(s3, BUCKET, "runs/x/", tmp_path) == ["runs/x/later.txt"]
    assert s3.get_object(Bucket=BUCKET, Key="runs/x/top.json")["Body"].read() == b"{}"


class RecordingSfn:
    """A Step Functions client stand-in that records answers (moto's non-executing backend drops them)."""

    def __init__(self, refuse_heartbeats: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.refuse_heartbeats = refuse_heartbeats

    def send_task_heartbeat(self, **kwargs: Any) -> None:
        from botocore.exceptions import ClientError

        self.calls.append(("heartbeat", kwargs))
        if self.refuse_heartbeats:
            raise ClientError({"Error": {"Code": "TaskTimedOut", "Message": "closed"}}, "SendTaskHeartbeat")

    def send_task_success(self, **kwargs: Any) -> None:
        self.calls.append(("success", kwargs))

    def send_task_failure(self, **kwargs: Any) -> None:
        self.calls.append(("failure", kwargs))


def _message() -> JobMessage:
    return JobMessage.model_validate({"task_token": "tok", "execution": "exec-1", "job": rounds_job()})


def test_success_uploads_run_dir_and_names_evidence(moto: MotoServer, tmp_path: Path) -> None:
    s3 = clients(moto)["s3"]
    make_bucket(s3)
    sfn = RecordingSfn()
    outcome = run_job(
        _message(), sfn=sfn, s3=s3, bucket=BUCKET, workdir=tmp_path, runner=RUNNER, execute=FakeRounds()
    )
    assert outcome.succeeded
    assert sfn.calls[-1][0] == "success"
    output = json.loads(sfn.calls[-1][1]["output"])
    assert output["evidence"] == f"s3://{BUCKET}/evidence/sha256-abc.json"
    assert output["run_dir"] == f"s3://{BUCKET}/runs/exec-1/{RUNNER}/"
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert keys == {f"runs/exec-1/{RUNNER}/cells/round1-a.json", f"runs/exec-1/{RUNNER}/evidence.json"}


def test_failure_reports_exit_status_and_last_line(moto: MotoServer, tmp_path: Path) -> None:
    s3 = clients(moto)["s3"]
    make_bucket(s3)
    sfn = RecordingSfn()
    outcome = run_job(
        _message(), sfn=sfn, s3=s3, bucket=BUCKET, workdir=tmp_path, runner=RUNNER, execute=FakeRounds("fail")
    )
    assert not outcome.succeeded
    kind, call = sfn.calls[-1]
    assert kind == "failure" and call["error"] == "RunnerJobFailed"
    cause = json.loads(call["cause"])
    assert cause == {
        "exit_status": 1,
        "message": "bench: engine a never became ready",
        "run_dir": f"s3://{BUCKET}/runs/exec-1/{RUNNER}/",
        "engine_survivors": [],
        "destroyed": None,  # not a matrix job: nothing to destroy
    }
    assert s3.get_object(Bucket=BUCKET, Key=f"runs/exec-1/{RUNNER}/evidence.json")


def test_heartbeats_while_running_and_refusal_stops_the_job(moto: MotoServer, tmp_path: Path) -> None:
    s3 = clients(moto)["s3"]
    make_bucket(s3)
    sfn = RecordingSfn(refuse_heartbeats=True)
    fake = FakeRounds("hang")
    outcome = run_job(
        _message(),
        sfn=sfn,
        s3=s3,
        bucket=BUCKET,
        workdir=tmp_path,
        runner=RUNNER,
        execute=fake,
        heartbeat_interval=0.05,
    )
    assert outcome.cancelled and not outcome.succeeded
    assert [kind for kind, _ in sfn.calls] == ["heartbeat"]  # nothing answered on a closed task
    assert not fake.started.is_set()  # refused at job start: the job never ran


def test_engine_containers_left_running_are_swept_and_named(moto: MotoServer, tmp_path: Path) -> None:
    s3 = clients(moto)["s3"]
    make_bucket(s3)
    sfn = RecordingSfn()
    swept: list[str] = []

    def sweep() -> list[str]:
        swept.append("gco-engine-1")
        return ["gco-engine-1"]

    outcome = run_job(
        _message(),
        sfn=sfn,
        s3=s3,
        bucket=BUCKET,
        workdir=tmp_path,
        runner=RUNNER,
        execute=FakeRounds(),
        sweep_engines=sweep,
    )
    assert swept == ["gco-engine-1"]
    assert outcome.output["engine_survivors"] == ["gco-engine-1"]
    assert json.loads(sfn.calls[-1][1]["output"])["engine_survivors"] == ["gco-engine-1"]


def test_subprocess_executor_runs_and_stops_the_group() -> None:
    done = subprocess_executor(["python3", "-c", "print('hi')"], threading.Event())
    assert done[0] == 0 and done[1].strip() == "hi"
    cancel = threading.Event()
    timer = threading.Timer(0.2, cancel.set)
    timer.start()
    rc, _, _ = subprocess_executor(["python3", "-c", "import time; time.sleep(30)"], cancel)
    timer.join()
    assert rc == -15


def test_main_needs_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GCO_JOB_KEY", raising=False)
    monkeypatch.delenv("GCO_EVIDENCE_BUCKET", raising=False)
    assert main() == 2


def test_main_refuses_a_malformed_job(moto: MotoServer, monkeypatch: pytest.MonkeyPatch) -> None:
    s3 = clients(moto)["s3"]
    make_bucket(s3)
    s3.put_object(Bucket=BUCKET, Key="jobs/bad.json", Body="only-a-token")
    monkeypatch.setenv("GCO_EVIDENCE_BUCKET", BUCKET)
    monkeypatch.setenv("GCO_JOB_KEY", "jobs/bad.json")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    assert main() == 1


def test_main_gives_up_when_no_job_arrives(moto: MotoServer, monkeypatch: pytest.MonkeyPatch) -> None:
    make_bucket(clients(moto)["s3"])
    monkeypatch.setenv("GCO_EVIDENCE_BUCKET", BUCKET)
    monkeypatch.setenv("GCO_JOB_KEY", "jobs/none.json")
    monkeypatch.setenv("GCO_JOB_WAIT_SECONDS", "0")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    assert main() == 1


class FlakySfn(RecordingSfn):
    """Heartbeats first lost on the network, then throttled, then accepted."""

    def send_task_heartbeat(self, **kwargs: Any) -> None:
        from botocore.exceptions import ClientError, EndpointConnectionError

        self.calls.append(("heartbeat", kwargs))
        beats = sum(1 for kind, _ in self.calls if kind == "heartbeat")
        if beats == 1:
            raise EndpointConnectionError(endpoint_url="https://states.us-east-1.amazonaws.com")
        if beats == 2:
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "SendTaskHeartbeat"
            )


def test_lost_or_throttled_heartbeats_do_not_stop_the_job(moto: MotoServer, tmp_path: Path) -> None:
    s3 = clients(moto)["s3"]
    make_bucket(s3)
    sfn = FlakySfn()
    fake = FakeRounds("hang")

    def release_after_four_beats() -> None:
        deadline = time.monotonic() + 10
        while sum(1 for kind, _ in sfn.calls if kind == "heartbeat") < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        fake.release.set()

    releaser = threading.Thread(target=release_after_four_beats, daemon=True)
    releaser.start()
    outcome = run_job(
        _message(),
        sfn=sfn,
        s3=s3,
        bucket=BUCKET,
        workdir=tmp_path,
        runner=RUNNER,
        execute=fake,
        heartbeat_interval=0.05,
    )
    releaser.join(timeout=10)
    kinds = [kind for kind, _ in sfn.calls]
    assert kinds.count("heartbeat") >= 4  # the first two failed; a refusal would have stopped it there
    assert outcome.succeeded and not outcome.cancelled
    assert kinds[-1] == "success"


def test_runner_id_is_the_callers_userid_and_names_its_run_prefix(moto: MotoServer) -> None:
    sts = aws.client("sts", region="us-east-1", endpoint_url=moto.url)
    identity = runner_id(sts)
    assert identity == sts.get_caller_identity()["UserId"]
    assert run_prefix("exec-1", identity) == f"runs/exec-1/{identity}/"


def test_runner_id_unreachable_is_a_runner_error() -> None:
    from botocore.exceptions import EndpointConnectionError

    class Down:
        def get_caller_identity(self) -> dict[str, str]:
            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")

    with pytest.raises(RunnerError, match="identity"):
        runner_id(Down())


def test_an_earlier_run_is_found_under_its_one_runner_folder(moto: MotoServer) -> None:
    s3 = aws.client("s3", endpoint_url=moto.url)
    make_bucket(s3)
    with pytest.raises(JobError, match="runs/exec-0/ holds no run directory to resume"):
        earlier_run_prefix(s3, BUCKET, "exec-0")
    s3.put_object(Bucket=BUCKET, Key=run_prefix("exec-0", RUNNER) + "matrix/checkpoint.json", Body=b"{}")
    s3.put_object(
        Bucket=BUCKET, Key=run_prefix("exec-01", "AROAX:i-9") + "matrix/checkpoint.json", Body=b"{}"
    )
    assert earlier_run_prefix(s3, BUCKET, "exec-0") == run_prefix("exec-0", RUNNER)
    s3.put_object(Bucket=BUCKET, Key=run_prefix("exec-0", "AROAX:i-2") + "matrix/checkpoint.json", Body=b"{}")
    with pytest.raises(JobError, match="runs/exec-0/ holds 2 runners' directories"):
        earlier_run_prefix(s3, BUCKET, "exec-0")
