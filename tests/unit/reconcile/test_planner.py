"""The pure planner: what the reconciler decides from (record, Region, observed objects)."""

from __future__ import annotations

import copy
from typing import Any

from gco.endpoints.record import RegionStatus
from gco.reconcile.objects import HASH_ANNOTATION, LIFECYCLE_ANNOTATION, ObjectRef
from gco.reconcile.planner import RouteCheck, plan
from gco.reconcile.proxy.routes import route_of
from gco.reconcile.render import render
from tests.unit.reconcile.records import (
    DELETION,
    EAST,
    GEN_EAST,
    LIFECYCLE,
    OTHER_LIFECYCLE,
    WEST,
    make_record,
)


def stored(objects: list[dict[str, Any]], ready: bool = True) -> list[dict[str, Any]]:
    """Rendered objects as a cluster would return them (uid, generation, Deployment status)."""
    out = []
    for index, obj in enumerate(objects):
        copy_ = copy.deepcopy(obj)
        copy_["metadata"].update(uid=f"uid-{index}", generation=1)
        if copy_["kind"] == "Deployment":
            replicas = copy_["spec"].get("replicas", 1)
            copy_["status"] = {"observedGeneration": 1, "replicas": replicas}
            if ready:
                copy_["status"].update(readyReplicas=replicas, updatedReplicas=replicas)
        out.append(copy_)
    return out


def running_status(record: Any, ready: int = 1) -> dict[str, RegionStatus]:
    return {
        EAST: RegionStatus(
            state="running",
            replicas_ready=ready,
            replicas_desired=ready,
            lifecycle_id=record.lifecycle_id,
            region_generation=GEN_EAST,
        )
    }


def test_fresh_deploy_applies_everything() -> None:
    record = make_record()
    step = plan("llama", record, EAST, [])
    assert [obj["kind"] for obj in step.apply] == [obj["kind"] for obj in render(record, EAST)]
    assert not step.converged
    assert step.status is None


def test_ready_objects_report_running_once_the_proxy_serves_the_route_then_nothing() -> None:
    record = make_record()
    observed = stored(render(record, EAST))
    asks = plan("llama", record, EAST, observed)
    assert asks.needs_route is not None and asks.status is None and not asks.converged
    assert asks.needs_route == route_of(next(o for o in render(record, EAST) if o["kind"] == "Ingress"))
    step = plan("llama", record, EAST, observed, route=RouteCheck())
    assert step.apply == ()
    assert step.status is not None
    assert (step.status.state, step.status.replicas_ready, step.status.replicas_desired) == ("running", 1, 1)
    assert step.status.region_generation == GEN_EAST
    settled = make_record(region_status=running_status(record))
    again = plan("llama", settled, EAST, observed)
    assert again.is_noop and again.needs_route is None  # reported running: the proxy is not asked again
    assert again.converged


def test_a_route_the_proxy_does_not_serve_yet_keeps_the_endpoint_creating_with_the_reason() -> None:
    record = make_record()
    observed = stored(render(record, EAST))
    waiting = "waiting for the proxy to serve the route (1 of 2 proxy pods)"
    step = plan("llama", record, EAST, observed, route=RouteCheck(waiting))
    assert step.status is not None and step.status.state == "creating"
    assert step.status.details() == {"restarts": None, "reason": waiting}
    assert not step.converged and step.reason == waiting
    was_running = make_record(region_status=running_status(record, ready=0))
    assert plan("llama", was_running, EAST, observed, route=RouteCheck(waiting)).status.state == "updating"  # type: ignore[union-attr]


def test_not_ready_reports_creating_then_updating() -> None:
    record = make_record()
    observed = stored(render(record, EAST), ready=False)
    asks = plan("llama", record, EAST, observed)
    assert asks.needs_pods and asks.status is None and not asks.converged  # why not ready: read the Pods
    step = plan("llama", record, EAST, observed, pods=[])
    assert step.status is not None
    assert step.status.state == "creating" and step.status.details() is None
    assert not step.converged and not step.needs_pods
    was_running = make_record(region_status=running_status(record))
    assert plan("llama", was_running, EAST, observed, pods=[]).status.state == "updating"  # type: ignore[union-attr]


def crashing_pod(restarts: int, waiting: bool = True) -> dict[str, object]:
    """A Pod as the API server returns it for a container that died of SIGSEGV (exit 139) and waits."""
    state = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s restarting failed"}}
    status = {
        "name": "engine",
        "ready": False,
        "restartCount": restarts,
        "state": state if waiting else {"running": {}},
        "lastState": {"terminated": {"exitCode": 139, "signal": 11, "reason": "Error"}},
    }
    return {"kind": "Pod", "status": {"phase": "Running", "containerStatuses": [status]}}


def test_a_crash_looping_replica_is_reported_with_its_exit_and_restarts() -> None:
    record = make_record()
    observed = stored(render(record, EAST), ready=False)
    step = plan("llama", record, EAST, observed, pods=[crashing_pod(3)])
    assert step.status is not None and not step.converged
    assert step.status.details() == {"restarts": 3, "reason": "engine exited 139 (SIGSEGV), CrashLoopBackOff"}
    stored_status = running_status(record)[EAST].model_dump() | {"state": "creating", "replicas_ready": 0}
    written = make_record(
        region_status={EAST: RegionStatus(**stored_status, **(step.status.details() or {}))}
    )
    assert (
        plan("llama", written, EAST, observed, pods=[crashing_pod(3)]).status is None
    )  # unchanged: no write
    again = plan("llama", written, EAST, observed, pods=[crashing_pod(4)])
    assert again.status is not None and again.status.restarts == 4  # each restart is news


def test_spec_change_and_manual_scaling_are_reapplied() -> None:
    record = make_record()
    observed = stored(render(record, EAST))
    changed = make_record({"replicas": 3})
    step = plan("llama", changed, EAST, observed)
    assert [obj["kind"] for obj in step.apply] == ["Deployment"]
    observed[0]["spec"]["replicas"] = 5
    drift = plan("llama", record, EAST, observed)
    assert [obj["metadata"]["name"] for obj in drift.apply] == ["llama"]


def test_objects_of_another_lifecycle_are_removed_never_adopted() -> None:
    old = stored(render(make_record(lifecycle_id=OTHER_LIFECYCLE), EAST))
    record = make_record()
    step = plan("llama", record, EAST, old)
    assert {ref.uid for ref in step.delete} == {obj["metadata"]["uid"] for obj in old}
    assert step.apply == ()  # the names are held until the old objects are gone
    assert plan("llama", record, EAST, []).apply


def test_no_longer_rendered_objects_are_removed() -> None:
    with_canary = make_record({"canary": {"image": "vllm/vllm-openai:v0.6.4"}})
    observed = stored(render(with_canary, EAST))
    step = plan("llama", make_record(), EAST, observed)
    assert sorted(ref.name for ref in step.delete) == ["llama--canary", "llama--canary"]


def test_terminating_objects_block_and_are_not_deleted_twice() -> None:
    record = make_record()
    observed = stored(render(record, EAST))
    observed[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    step = plan("llama", record, EAST, observed)
    assert step.delete == ()
    assert not step.converged


def test_stopped_counts_down_to_stopped() -> None:
    record = make_record(desired_state="stopped")
    observed = stored(render(record, EAST))
    step = plan("llama", record, EAST, observed)
    assert step.status is not None
    assert (step.status.state, step.status.replicas_desired) == ("stopped", 0)
    assert step.converged
    live = stored(render(make_record(), EAST))
    for obj in live:
        obj["metadata"]["annotations"][HASH_ANNOTATION] = render(record, EAST)[0]["metadata"]["annotations"][
            HASH_ANNOTATION
        ]
    stopping = plan("llama", record, EAST, [live[0]])
    assert stopping.apply  # the rest is applied first


def test_removed_region_deletes_then_acknowledges_with_its_token() -> None:
    record = make_record(target_regions=[WEST])
    observed = stored(render(make_record(), EAST))
    step = plan("llama", record, EAST, observed)
    assert len(step.delete) == len(observed)
    assert step.status is not None
    assert step.status.state == "deleting"
    done = plan("llama", record, EAST, [])
    assert done.status is not None
    assert (done.status.state, done.status.region_generation) == ("deleted", GEN_EAST)
    acked = make_record(
        target_regions=[WEST],
        region_status={
            EAST: RegionStatus(state="deleted", lifecycle_id=LIFECYCLE, region_generation=GEN_EAST)
        },
    )
    assert plan("llama", acked, EAST, []).is_noop
    stranger = make_record(target_regions=[WEST], cleanup_regions=[WEST])
    assert plan("llama", stranger, EAST, []).is_noop


def test_deleted_record_deletes_acknowledges_and_purges() -> None:
    record = make_record(desired_state="deleted", deletion_generation=DELETION, deletion_regions=[EAST, WEST])
    observed = stored(render(make_record(), EAST))
    step = plan("llama", record, EAST, observed)
    assert len(step.delete) == len(observed)
    ack = plan("llama", record, EAST, []).status
    assert ack is not None
    assert (ack.state, ack.deletion_generation, ack.lifecycle_id) == ("deleted", DELETION, LIFECYCLE)
    east_acked = {EAST: RegionStatus(state="deleted", deletion_generation=DELETION)}
    waiting = make_record(
        desired_state="deleted",
        deletion_generation=DELETION,
        deletion_regions=[EAST, WEST],
        region_status=east_acked,
    )
    assert plan("llama", waiting, EAST, []).is_noop
    all_acked = {**east_acked, WEST: RegionStatus(state="deleted", deletion_generation=DELETION)}
    final = make_record(
        desired_state="deleted",
        deletion_generation=DELETION,
        deletion_regions=[EAST, WEST],
        region_status=all_acked,
    )
    assert plan("llama", final, EAST, []).purge


def test_missing_record_removes_leftovers() -> None:
    observed = stored(render(make_record(), EAST))
    step = plan("llama", None, EAST, observed)
    assert len(step.delete) == len(observed)
    assert plan("llama", None, EAST, []).is_noop


def test_object_refs_sort_and_print() -> None:
    obj = stored(render(make_record(), EAST))[0]
    ref = ObjectRef.of(obj)
    assert str(ref) == "Deployment gco-inference/llama"
    assert obj["metadata"]["annotations"][LIFECYCLE_ANNOTATION] == LIFECYCLE
