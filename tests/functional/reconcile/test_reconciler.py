"""The reconcile loop's outcomes on an injected clock: waiting for readiness, requeue, legacy
records, lost races, the sweep's accounting, and the local stack's background threads.

It runs the reconciler library in this process: it calls the in-process `Reconciler` directly."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from gco.endpoints import EndpointStore
from gco.endpoints.codec import to_item
from gco.local.moto.motoserver import MotoServer
from gco.local.region.reconcilers import LocalReconcilers
from gco.local.standin import Fault, StandInKubeAPI
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
from gco.reconcile.reconciler import Reconciler
from gco.reconcile.sweep import sweep
from tests.unit.reconcile.records import EAST, IMAGE, WEST

SPEC: dict[str, Any] = {"image": IMAGE, "model_id": "m"}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def api(clock: Clock) -> Iterator[StandInKubeAPI]:
    with StandInKubeAPI(ready_delay=3.0, deletion_delay=1.0, clock=clock) as server:
        yield server


@pytest.fixture
def reconciler(store: EndpointStore, api: StandInKubeAPI, clock: Clock) -> Iterator[Reconciler]:
    retry = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.001)
    cluster = KubeCluster(api.url, static_token("t"), retry=retry, sleep=lambda _: None)
    yield Reconciler(store, cluster, EAST, wait=0.0, poll=1.0, clock=clock, sleep=clock.sleep)
    cluster.close()


def state(store: EndpointStore, name: str = "llama") -> tuple[str, int, int]:
    record = store.get(name)
    assert record is not None
    status = record.region_status[EAST]
    return status.state, status.replicas_ready, status.replicas_desired


def test_not_ready_requeues_then_reports_running(
    store: EndpointStore, reconciler: Reconciler, clock: Clock
) -> None:
    store.create("llama", SPEC, [EAST])
    outcome = reconciler.reconcile("llama")
    assert outcome.kind == "requeue"
    assert outcome.applied == 5  # Deployment, Service, budget, NetworkPolicy, route
    assert state(store) == ("creating", 0, 1)
    assert reconciler.reconcile("llama").kind == "requeue"  # nothing changed: no write
    clock.now += 3.0
    outcome = reconciler.reconcile("llama")
    assert (outcome.kind, outcome.status_writes) == ("done", 1)
    assert state(store) == ("running", 1, 1)


def test_waiting_within_one_call(store: EndpointStore, reconciler: Reconciler) -> None:
    store.create("llama", SPEC, [EAST])
    outcome = reconciler.reconcile("llama", wait=10.0)
    assert outcome.kind == "done"
    assert state(store) == ("running", 1, 1)


def test_deletion_waits_for_termination(
    store: EndpointStore, reconciler: Reconciler, api: StandInKubeAPI
) -> None:
    record = store.create("llama", SPEC, [EAST])
    reconciler.reconcile("llama", wait=10.0)
    store.update_desired_state("llama", "deleted", expected_lifecycle_id=record.lifecycle_id)
    outcome = reconciler.reconcile("llama", wait=0.0)
    assert outcome.kind == "requeue"
    assert api.endpoint_objects()
    outcome = reconciler.reconcile("llama", wait=5.0)
    assert (outcome.kind, outcome.purged) == ("done", True)
    assert store.get("llama") is None
    assert api.endpoint_objects() == []


def test_pass_limit_bounds_one_call(store: EndpointStore, reconciler: Reconciler) -> None:
    store.create("llama", SPEC, [EAST])
    reconciler.max_passes = 1
    outcome = reconciler.reconcile("llama", wait=10.0)
    assert outcome.kind == "requeue"
    assert "pass limit" in outcome.detail


def test_legacy_record_is_backfilled_then_deployed(store: EndpointStore, reconciler: Reconciler) -> None:
    legacy = {
        "endpoint_name": "old",
        "desired_state": "running",
        "target_regions": [EAST],
        "namespace": "gco-inference",
        "spec": SPEC,
        "updated_at": "2025-01-01T00:00:00.000000Z",
    }
    store.client.put_item(TableName=store.table_name, Item=to_item(legacy))
    outcome = reconciler.reconcile("old", wait=10.0)
    assert outcome.kind == "done"
    record = store.get("old")
    assert record is not None
    assert record.lifecycle_id is not None
    assert state(store, "old") == ("running", 1, 1)


def test_lost_status_race_is_reread(
    store: EndpointStore, reconciler: Reconciler, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create("llama", SPEC, [EAST])
    real = store.region_writes.update_region_status
    lost: list[int] = []

    def lose_once(*args: Any, **kwargs: Any) -> Any:
        if not lost:
            lost.append(1)
            return None
        return real(*args, **kwargs)

    monkeypatch.setattr(store.region_writes, "update_region_status", lose_once)
    assert reconciler.reconcile("llama", wait=10.0).kind == "done"
    assert lost == [1]
    assert state(store) == ("running", 1, 1)


def test_sweep_accounts_for_every_outcome(
    store: EndpointStore, reconciler: Reconciler, api: StandInKubeAPI
) -> None:
    store.create("waiting", SPEC, [EAST])
    store.create("broken", SPEC, [EAST])
    store.create("rejected", SPEC, [EAST])
    store.create("elsewhere", SPEC, [WEST])
    original = reconciler.cluster.apply

    def apply(obj: Mapping[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["labels"].get("gco.dev/endpoint")
        if name == "broken":
            api.inject(Fault(status=500, times=2))
        if name == "rejected":
            api.inject(Fault(status=400, method="PATCH"))
        return original(obj)

    reconciler.cluster.apply = apply  # type: ignore[method-assign]
    report = sweep(reconciler)
    assert report.failed == ["broken"]
    assert (report.endpoints, report.done, report.requeued, report.terminal) == (4, 1, 1, 1)
    assert report.as_dict()["failed"] == ["broken"]


def test_local_stack_runs_in_the_background(store: EndpointStore, moto: MotoServer) -> None:
    with LocalReconcilers(store, [EAST], endpoint_url=moto.url, wait=1.0, poll=0.01) as stack:
        stack.start(poll_interval=0.02, sweep_interval=0.05)
        store.create("llama", SPEC, [EAST])
        for _ in range(500):  # bounded; no assertion on how long it took
            record = store.get("llama")
            if record is not None and EAST in record.region_status:
                break
            time.sleep(0.02)
        assert state(store) == ("running", 1, 1)
        stack.stop()
