"""The run's bounds without I/O: a Region's terminal error, the queue timeout, and the deadline
cutting a wait (the clocks injected)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from gco.endpoints.store import EndpointStore
from gco.validation import parse_settings
from gco.validation.checks import Readiness, ready
from gco.validation.ports import EndpointHttp
from gco.validation.run import Matrix, new_checkpoint
from gco.validation.waits import cannot_be_ready
from tests.unit.reconcile.records import EAST, LIFECYCLE, OTHER_LIFECYCLE, make_record
from tests.unit.validation.sample import settings
from tests.unit.validation.test_hpa_sampling import Clock, OneRegion, ScriptedReader

BASE = 1_800_000_000.0


def _status(**fields: Any) -> dict[str, Any]:
    return {EAST: {"state": "creating", "lifecycle_id": LIFECYCLE, **fields}}


def test_an_error_of_the_current_lifecycle_is_terminal_with_its_reason() -> None:
    seen = ready(make_record(region_status=_status(state="error", error="KEDA missing")), EAST)
    assert seen == Readiness(False, "error 0/0", 0, "KEDA missing")
    stale = ready(make_record(region_status=_status(state="error", lifecycle_id=OTHER_LIFECYCLE)), EAST)
    assert stale.error is None  # an earlier lifecycle's error says nothing about this one
    assert ready(
        make_record(region_status=_status(state="running", replicas_ready=1, replicas_desired=1)), EAST
    ).done


def test_what_ends_the_ready_wait_early() -> None:
    terminal = cannot_be_ready(EAST, Readiness(False, "error 0/0", 0, "refused"), 0.0, 60)
    assert terminal is not None and terminal.detail == f"{EAST} reports a terminal error: refused"
    assert terminal.data["region_error"] == "refused"
    gone = cannot_be_ready(EAST, Readiness(False, "no record"), 0.0, 60)
    assert gone is not None and "record is gone" in gone.detail
    waiting = Readiness(False, "creating 0/1", 0)
    assert cannot_be_ready(EAST, waiting, 59.9, 60) is None
    queued = cannot_be_ready(EAST, waiting, 60.0, 60)
    assert queued is not None and queued.data["timeout"] == "queue_timeout_seconds"
    assert cannot_be_ready(EAST, Readiness(False, "creating 1/2", 1), 600.0, 60) is None  # one replica runs


def test_the_deadline_cuts_the_hpa_wait_and_records_where(tmp_path: Path) -> None:
    parsed = parse_settings(settings(job_timeout_seconds=10, hpa_timeout_seconds=300))
    checkpoint = new_checkpoint(parsed, tmp_path / "settings.json", "d1", now=BASE)
    lifecycles = {entry.name: f"{index:064x}" for index, entry in enumerate(checkpoint.endpoints)}
    entries = [e.model_copy(update={"lifecycle_id": lifecycles[e.name]}) for e in checkpoint.endpoints]
    clock = Clock()
    stuck = {"mx-d1-vllm-hpa": [(1, 1)], "mx-d1-tgi-hpa": [(1, 1)]}
    matrix = Matrix(
        settings=parsed,
        store=cast(EndpointStore, None),  # the HPA check reads only the cluster
        clusters=OneRegion(ScriptedReader(stuck, lifecycles)),
        http=cast(EndpointHttp, None),
        run_dir=tmp_path,
        clock=clock,
        sleep=clock.sleep,
        wall=lambda: BASE + clock.now,
        progress=lambda line: None,
    )
    matrix.state = checkpoint.model_copy(update={"endpoints": entries})
    matrix.region = parsed.selected_region
    assert matrix.state.deadline == BASE + 10
    assert not matrix._hpa()
    assert 10 <= clock.now < 12  # cut at the deadline, not the 300 s hpa timeout
    steps = [(s.step, s.endpoint, s.verdict) for s in matrix.state.steps]
    assert steps == [
        ("hpa", "mx-d1-vllm-hpa", "fail"),
        ("hpa", "mx-d1-tgi-hpa", "fail"),
        ("job_timeout", None, "fail"),
    ]
    assert matrix.state.steps[-1].data == {"step": "hpa", "endpoint": None, "deadline": BASE + 10}
    assert not matrix._ready()  # every later wait ends at once; the timeout is recorded once
    assert [s.step for s in matrix.state.steps].count("job_timeout") == 1
