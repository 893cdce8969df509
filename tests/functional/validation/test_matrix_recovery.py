"""The matrix survives its machine, on the local stack over real HTTP (moto server, stand-in clusters,
engine processes and proxies): a `gco matrix run` killed with SIGKILL after deploying, its
machine's directory removed, resumed by a later runner job from the evidence bucket; a killed run
destroyed by the runner's failure path, by `gco matrix destroy`, or by the scheduled cleanup once
its deadline passed; the job timeout, the queue timeout and a Region's terminal error each ending
the run with the reason in the evidence; a namespace the reconciler is not granted refused first.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gco import aws
from gco.cli import main
from gco.endpoints import EndpointStore
from gco.evidence.store import LocalEvidenceStore
from gco.local.moto.motoserver import MotoServer
from gco.local.standin.faults import Fault
from gco.validation import OWNER_LABEL
from gco.validation.checkpoint import CHECKPOINT, REVISIONS, revision_path
from gco.validation.run import Matrix, new_checkpoint
from gco.validation.service import load_settings
from gpu_runner import run_job
from gpu_runner.runner import run_prefix
from tests.functional.gpu_runner.test_runner import RecordingSfn
from tests.functional.validation.conftest import (
    StackFactory,
    assert_nothing_left,
    fake_table,
    ports,
    run_matrix,
    stack_environment,
    steps,
    write_settings,
)
from tests.functional.validation.test_matrix_runner import (
    BUCKET,
    FIRST_RUNNER,
    GCO,
    LATER_RUNNER,
    local_gco,
    message,
)
from tests.unit.reconcile.records import EAST
from tests.unit.validation.sample import SETTINGS

DEADLINE_S = 90.0
POLL_S = 0.05


def _bucket(moto: MotoServer) -> Any:
    s3 = aws.client("s3", endpoint_url=moto.url)
    s3.create_bucket(Bucket=BUCKET)
    return s3


def _newest_revision(s3: Any, prefix: str) -> dict[str, Any]:
    """The newest checkpoint revision mirrored under `prefix` ({} while there is none)."""
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}{REVISIONS.as_posix()}/").get("Contents", [])
    if not listed:
        return {}
    key = max(item["Key"] for item in listed)
    return dict(json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()))


def _local_checkpoint(run_dir: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((run_dir / CHECKPOINT).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def _deploys(checkpoint: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in checkpoint.get("steps") or [] if s["step"] == "deploy"]


def _kill_when(process: subprocess.Popen[bytes], deployed: Callable[[], bool]) -> None:
    """SIGKILL `process` once `deployed()` holds (bounded): a machine lost mid-run, nothing cleaned."""
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline and process.poll() is None and not deployed():
            time.sleep(POLL_S)
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait(timeout=10)


def _labelled(store: EndpointStore, run_id: str) -> list[str]:
    return [r.endpoint_name for r in store.list(consistent_read=True) if r.labels.get(OWNER_LABEL) == run_id]


@pytest.mark.slow
def test_a_run_killed_after_deploying_resumes_on_another_machine_from_the_bucket(
    make_stack: StackFactory,
    store: EndpointStore,
    moto: MotoServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stack = make_stack()
    stack_environment(stack, monkeypatch)
    s3 = _bucket(moto)
    first = tmp_path / "first-machine"
    (first / "input").mkdir(parents=True)
    settings_path = write_settings(first / "input" / "settings.json")
    first_prefix = run_prefix("exec-1", FIRST_RUNNER)
    mirror = ["--evidence-bucket", BUCKET, "--run-uri", f"s3://{BUCKET}/{first_prefix}"]
    process = subprocess.Popen(
        [GCO, "matrix", "run", str(settings_path), "--consent", "--run-dir", str(first / "run"), *mirror],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _kill_when(process, lambda: len(_deploys(_newest_revision(s3, first_prefix))) == 4)
    mirrored = _newest_revision(s3, first_prefix)
    assert len(_deploys(mirrored)) == 4 and mirrored["finished"] is False
    run_id = str(mirrored["run_id"])
    lifecycles = {e["name"]: e["lifecycle_id"] for e in mirrored["endpoints"]}
    assert sorted(_labelled(store, run_id)) == sorted(lifecycles)  # its four endpoints outlived it
    shutil.rmtree(first)  # the machine is gone: its settings and run directory with it

    # `gco matrix resume` of the run's folder in the bucket, with changed settings: copied, then
    # refused naming the field; nothing was touched.
    copy = tmp_path / "inspect"
    changed = write_settings(tmp_path / "changed.json", request_max_tokens=9)
    capsys.readouterr()
    folder = f"s3://{BUCKET}/{first_prefix}"
    assert main(["matrix", "resume", folder, "--settings", str(changed), "--run-dir", str(copy)]) == 2
    assert capsys.readouterr().err.startswith("error: request_max_tokens: differs from the identity")
    assert (copy / revision_path(mirrored["revision"])).is_file()
    assert sorted(_labelled(store, run_id)) == sorted(lifecycles)

    # A later job on another instance: the runner copies the run back and resumes it with the
    # job's copy of the settings.
    sfn = RecordingSfn()
    outcome = run_job(
        message("exec-2", settings=SETTINGS, resume_execution="exec-1"),
        sfn=sfn,
        s3=s3,
        bucket=BUCKET,
        workdir=tmp_path / "second-machine",
        runner=LATER_RUNNER,
        execute=local_gco,
        heartbeat_interval=0.5,
        sweep_engines=list,
    )
    assert outcome.succeeded, outcome.output
    assert " PASS " in str(outcome.output["summary"]) and outcome.output["evidence_id"]
    finished = _newest_revision(s3, run_prefix("exec-2", LATER_RUNNER))
    assert finished["finished"] is True and finished["verdict"] == "pass"
    assert finished["revision"] > mirrored["revision"]
    assert [s["endpoint"] for s in _deploys(finished)] == list(lifecycles)  # each deployed once
    assert {e["name"]: e["lifecycle_id"] for e in finished["endpoints"]} == lifecycles
    assert_nothing_left(stack, store, run_id)


def _killing_executor(run_dir: Path) -> Callable[[list[str], threading.Event], tuple[int, str, str]]:
    """The runner's executor with `gco matrix run` killed once it deployed (its instance lost the
    process); anything else (`gco matrix destroy`) runs as it would."""

    def execute(argv: list[str], cancel: threading.Event) -> tuple[int, str, str]:
        if argv[1:3] != ["matrix", "run"]:
            return local_gco(argv, cancel)
        process = subprocess.Popen(
            [GCO, *argv[1:]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        _kill_when(process, lambda: len(_deploys(_local_checkpoint(run_dir))) == 4)
        return process.returncode, "", ""

    return execute


@pytest.mark.slow
def test_the_runner_destroys_a_run_whose_process_was_killed(
    make_stack: StackFactory,
    store: EndpointStore,
    moto: MotoServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = make_stack()
    stack_environment(stack, monkeypatch)
    s3 = _bucket(moto)
    sfn = RecordingSfn()
    outcome = run_job(
        message("exec-k", settings=SETTINGS),
        sfn=sfn,
        s3=s3,
        bucket=BUCKET,
        workdir=tmp_path,
        runner=FIRST_RUNNER,
        execute=_killing_executor(tmp_path / "run"),
        heartbeat_interval=0.5,
        sweep_engines=list,
    )
    assert not outcome.succeeded
    kind, call = sfn.calls[-1]
    cause = json.loads(call["cause"])
    assert kind == "failure" and cause["exit_status"] == -signal.SIGKILL
    assert cause["destroyed"]["exit_status"] == 0, cause
    checkpoint = _local_checkpoint(tmp_path / "run")
    assert [s["verdict"] for s in checkpoint["steps"] if s["step"] == "destroy"] == ["pass"] * 4
    assert checkpoint["steps"][-1]["step"] == "inventory" and checkpoint["steps"][-1]["verdict"] == "pass"
    assert_nothing_left(stack, store, str(checkpoint["run_id"]))


class ClosingSfn(RecordingSfn):
    """Step Functions closing the task once `closed()` holds (the execution timed out or was
    aborted): every later heartbeat is refused as the service refuses it (TaskTimedOut)."""

    def __init__(self, closed: Callable[[], bool]) -> None:
        super().__init__()
        self.closed = closed

    def send_task_heartbeat(self, **kwargs: Any) -> None:
        self.refuse_heartbeats = self.refuse_heartbeats or self.closed()
        super().send_task_heartbeat(**kwargs)


@pytest.mark.slow
def test_a_task_closed_mid_run_stops_the_run_and_destroys_it(
    make_stack: StackFactory,
    store: EndpointStore,
    moto: MotoServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = make_stack()
    stack_environment(stack, monkeypatch)
    sfn = ClosingSfn(lambda: len(_deploys(_local_checkpoint(tmp_path / "run"))) == 4)
    outcome = run_job(
        message("exec-t", settings=SETTINGS),
        sfn=sfn,
        s3=_bucket(moto),
        bucket=BUCKET,
        workdir=tmp_path,
        runner=FIRST_RUNNER,
        execute=local_gco,
        heartbeat_interval=0.1,
        sweep_engines=list,
    )
    assert outcome.cancelled and outcome.output["destroyed"]["exit_status"] == 0, outcome.output
    assert [kind for kind, _ in sfn.calls if kind != "heartbeat"] == []  # a closed task gets no answer
    checkpoint = _local_checkpoint(tmp_path / "run")
    assert checkpoint["finished"] is False
    assert [s["verdict"] for s in checkpoint["steps"] if s["step"] == "destroy"] == ["pass"] * 4
    assert_nothing_left(stack, store, str(checkpoint["run_id"]))


@pytest.mark.slow
def test_gco_matrix_destroy_leaves_nothing_of_a_killed_run(
    make_stack: StackFactory,
    store: EndpointStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stack = make_stack()
    stack_environment(stack, monkeypatch)
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        [
            GCO,
            "matrix",
            "run",
            str(write_settings(tmp_path / "s.json")),
            "--consent",
            "--run-dir",
            str(run_dir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _kill_when(process, lambda: len(_deploys(_local_checkpoint(run_dir))) == 4)
    run_id = str(_local_checkpoint(run_dir)["run_id"])
    assert len(_labelled(store, run_id)) == 4
    capsys.readouterr()
    assert main(["matrix", "destroy", str(run_dir), "--output", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["clean"] is True and answer["inventory"]["records"] == []
    assert_nothing_left(stack, store, run_id)
    assert main(["matrix", "destroy", str(run_dir)]) == 0  # nothing left: still a success
    capsys.readouterr()
    assert main(["matrix", "destroy", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.startswith("error: RUN_DIR: no checkpoint at ")


@pytest.mark.slow
def test_the_scheduled_cleanup_destroys_a_killed_run_once_its_deadline_passed(
    make_stack: StackFactory,
    store: EndpointStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = make_stack()  # its sweep runs every 0.5 s, with the cleanup of expired matrix runs
    stack_environment(stack, monkeypatch)
    run_dir = tmp_path / "run"
    path = write_settings(tmp_path / "s.json", job_timeout_seconds=15)
    process = subprocess.Popen(
        [GCO, "matrix", "run", str(path), "--consent", "--run-dir", str(run_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _kill_when(process, lambda: len(_deploys(_local_checkpoint(run_dir))) == 4)
    checkpoint = _local_checkpoint(run_dir)
    run_id, deadline = str(checkpoint["run_id"]), int(checkpoint["deadline"])
    assert len(_labelled(store, run_id)) == 4 and time.time() < deadline  # killed before its deadline
    limit = time.monotonic() + DEADLINE_S
    while _labelled(store, run_id) and time.monotonic() < limit:
        time.sleep(POLL_S * 10)
    assert _labelled(store, run_id) == []
    assert time.time() >= deadline  # not before the deadline
    assert_nothing_left(stack, store, run_id)


@pytest.mark.slow
def test_the_job_timeout_ends_a_run_mid_way_destroys_and_records_the_step(
    make_stack: StackFactory, store: EndpointStore, tmp_path: Path
) -> None:
    stack = make_stack()
    stack.autoscalers[EAST].stuck = True  # the hpa step would wait its whole 300 s
    result = run_matrix(stack, store, tmp_path, run_id="t1", job_timeout_seconds=30, hpa_timeout_seconds=300)
    assert result.verdict == "fail"
    done = steps(tmp_path)
    timeout = next(s for s in done if s["step"] == "job_timeout")
    assert timeout["verdict"] == "fail" and timeout["data"]["step"] == "hpa"
    assert "job_timeout_seconds (30 s) passed at hpa" in timeout["detail"]
    assert [s["verdict"] for s in done if s["step"] == "destroy"] == ["pass"] * 4
    assert "proxy" not in {s["step"] for s in done}
    evidence = LocalEvidenceStore(tmp_path / "run" / "evidence").get(result.evidence_id)
    assert timeout in evidence.data["steps"] and "proxy" in evidence.missing
    assert_nothing_left(stack, store, "t1")


@pytest.mark.slow
def test_the_queue_timeout_ends_the_wait_for_an_endpoint_that_never_gets_a_replica(
    make_stack: StackFactory, store: EndpointStore, tmp_path: Path
) -> None:
    stack = make_stack(table=fake_table("tgi", extra=("--never-ready",)))
    result = run_matrix(stack, store, tmp_path, run_id="q1", queue_timeout_seconds=3)
    assert result.verdict == "fail"
    ready = {s["endpoint"]: s for s in steps(tmp_path) if s["step"] == "ready"}
    never = ("mx-q1-tgi-baseline", "mx-q1-tgi-hpa")
    # The first to pass its queue timeout ends the wait for every endpoint still waiting: on a loaded
    # machine the two never-ready endpoints reach theirs in different polls, and the later one is
    # then reported as not awaited.
    timed_out = [name for name in never if ready[name]["data"].get("timeout") == "queue_timeout_seconds"]
    assert timed_out, [ready[name]["detail"] for name in never]
    for name in never:
        assert ready[name]["verdict"] == "fail"
        if name in timed_out:
            assert "no replica ready within queue_timeout_seconds (3 s)" in ready[name]["detail"]
            assert ready[name]["seconds"] < 60  # the readiness timeout was not waited out
        else:
            assert ready[name]["detail"] == f"not awaited: {timed_out[0]} cannot be ready"
    evidence = LocalEvidenceStore(tmp_path / "run" / "evidence").get(result.evidence_id)
    assert ready[timed_out[0]] in evidence.data["steps"]
    assert_nothing_left(stack, store, "q1")


@pytest.mark.slow
def test_a_terminal_region_error_ends_the_ready_step_at_once_with_its_reason(
    make_stack: StackFactory, store: EndpointStore, tmp_path: Path
) -> None:
    stack = make_stack()
    api = stack.reconcilers.regions[EAST].api
    api.inject(Fault(status=422, method="PATCH", times=10_000))  # every apply rejected: terminal

    def lift_after_ready(line: str) -> None:
        if ": ready " in line:
            api.faults.clear()  # the destruction's route removal is an apply too

    path = write_settings(tmp_path / "settings.json")
    settings_model = load_settings(path)
    matrix = Matrix(
        settings=settings_model,
        store=store,
        run_dir=tmp_path / "run",
        progress=lift_after_ready,
        **ports(stack),
    )
    result = matrix.execute(new_checkpoint(settings_model, path, "e1"))
    assert result.verdict == "fail"
    ready = [s for s in steps(tmp_path) if s["step"] == "ready" and s["data"].get("region_error")]
    assert ready, steps(tmp_path)
    reason = ready[0]["data"]["region_error"]
    assert reason and ready[0]["detail"] == f"{EAST} reports a terminal error: {reason}"
    assert all(s["seconds"] < 60 for s in steps(tmp_path) if s["step"] == "ready")  # not its timeout
    assert_nothing_left(stack, store, "e1")


def test_a_namespace_the_reconciler_is_not_granted_is_refused_before_deploying(
    store: EndpointStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_settings(tmp_path / "settings.json", namespace="team-a")
    assert main(["matrix", "run", str(path), "--consent", "--run-dir", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err == (
        "error: namespace: must be a namespace the reconciler is granted: gco-inference\n"
    )
    assert store.list(consistent_read=True) == [] and not (tmp_path / "run").exists()
    assert main(["matrix", "run", str(write_settings(tmp_path / "ok.json")), "--run-uri", "bucket/x"]) == 2
    assert capsys.readouterr().err.startswith("error: --run-uri: ")
