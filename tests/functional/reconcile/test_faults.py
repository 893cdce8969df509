"""Faults: Kubernetes 429/500/timeouts/conflicts, DynamoDB throttling, a handler that dies mid
batch, a poison record. The work completes on retry or at the next sweep, with no duplicate
objects and no lost acknowledgement.

It runs the reconciler library in this process (`local`): it injects faults into that reconciler and
reads its in-process sweep reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from gco.endpoints import EndpointStore
from gco.local.region.reconcilers import LocalReconcilers
from gco.local.standin import Fault
from gco.reconcile.handler import handle_stream_event
from gco.reconcile.render import render
from tests.unit.reconcile.records import EAST, IMAGE, WEST

SPEC: dict[str, Any] = {"image": IMAGE, "model_id": "m"}
EVENTS = Path(__file__).parents[2] / "events"


def settled(store: EndpointStore, local: LocalReconcilers, name: str = "llama") -> None:
    record = store.get(name)
    assert record is not None
    for region in record.target_regions:
        assert record.region_status[region].state == "running"
        objects = [
            obj
            for obj in local.regions[region].api.endpoint_objects()
            if obj["metadata"]["labels"]["gco.dev/endpoint"] == name
        ]
        keys = [(obj["kind"], obj["metadata"]["name"]) for obj in objects]
        assert len(keys) == len(set(keys)) == len(render(record, region))


@pytest.mark.parametrize(
    "fault",
    [
        Fault(status=429, times=3),
        Fault(status=500, times=2),
        Fault(status=409, method="PATCH", times=2),
        Fault(timeout="before", method="PATCH"),
        Fault(timeout="after", method="PATCH"),
    ],
    ids=["429", "500", "409", "timeout-before", "timeout-after"],
)
def test_transient_kubernetes_faults_are_absorbed(
    store: EndpointStore, local: LocalReconcilers, fault: Fault
) -> None:
    for stack in local.regions.values():
        stack.api.fault_sleep = 0.3
        stack.cluster.timeout = 0.1
        stack.api.inject(Fault(fault.status, fault.timeout, fault.method, fault.times))
    store.create("llama", SPEC, [EAST, WEST])
    local.pump()
    settled(store, local)


def test_persistent_kubernetes_failure_is_retried_by_the_stream_then_the_sweep(
    store: EndpointStore, local: LocalReconcilers
) -> None:
    east = local.regions[EAST]
    east.api.inject(Fault(status=503, times=1000))
    store.create("llama", SPEC, [EAST, WEST])
    local.pump()
    assert east.poller.dead_letters  # bounded retries, then the dead-letter queue
    record = store.get("llama")
    assert record is not None
    assert EAST not in record.region_status
    east.api.faults.clear()
    reports = local.sweep()
    assert reports[EAST].failed == []
    settled(store, local)


def test_rejected_objects_are_terminal_and_reported(store: EndpointStore, local: LocalReconcilers) -> None:
    local.regions[EAST].api.inject(Fault(status=422, method="PATCH"))
    store.create("llama", SPEC, [EAST])
    local.pump()
    record = store.get("llama")
    assert record is not None
    assert record.region_status[EAST].state == "error"
    assert "422" in (record.region_status[EAST].error or "")
    local.sweep()
    settled(store, local)


class Throttled:
    """A DynamoDB client whose first `times` calls of `operation` are throttled (retries exhausted)."""

    def __init__(self, client: Any, operation: str, times: int) -> None:
        self._client = client
        self._operation = operation
        self.left = times

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if name != self._operation:
            return method

        def throttled(**kwargs: Any) -> Any:
            if self.left > 0:
                self.left -= 1
                raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, name)
            return method(**kwargs)

        return throttled


@pytest.mark.parametrize("operation", ["get_item", "update_item"])
def test_dynamodb_throttling_slows_but_never_drops_work(
    store: EndpointStore, local: LocalReconcilers, operation: str
) -> None:
    record = store.create("llama", SPEC, [EAST, WEST])
    throttled = Throttled(store.client, operation, times=2)
    store.client = throttled
    local.pump()
    assert throttled.left == 0
    settled(store, local)
    store.update_desired_state("llama", "deleted", expected_lifecycle_id=record.lifecycle_id)
    throttled.left = 2
    local.pump()
    assert store.get("llama") is None  # no acknowledgement was lost
    assert all(stack.api.endpoint_objects() == [] for stack in local.regions.values())
    assert all(not stack.poller.dead_letters for stack in local.regions.values())


class Crash(BaseException):
    """The execution environment dies (not an exception Powertools could catch)."""


def test_handler_dying_mid_batch_is_redelivered_without_duplicates(
    store: EndpointStore, local: LocalReconcilers, monkeypatch: pytest.MonkeyPatch
) -> None:
    east = local.regions[EAST]
    applied: list[str] = []
    original = east.cluster.apply

    def apply_then_die(obj: Any) -> Any:
        stored = original(obj)
        applied.append(obj["metadata"]["name"])
        if len(applied) == 2:
            raise Crash
        return stored

    def invocation(event: dict[str, Any], context: Any) -> dict[str, Any]:
        try:
            return east.handle(event, context)
        except Crash:
            raise RuntimeError("the Lambda runtime exited mid-batch") from None

    monkeypatch.setattr(east.cluster, "apply", apply_then_die)
    east.poller.handler = invocation
    store.create("llama", SPEC, [EAST, WEST])
    store.create("other", SPEC, [EAST])
    local.pump()
    settled(store, local)
    settled(store, local, "other")
    assert not east.poller.dead_letters


def test_poison_record_is_a_batch_item_failure(store: EndpointStore, local: LocalReconcilers) -> None:
    store.create("llama", SPEC, [EAST])
    event = json.loads((EVENTS / "dynamodb_stream_batch.json").read_text())
    response = handle_stream_event(event, local.regions[EAST].reconciler)
    assert response == {"batchItemFailures": [{"itemIdentifier": "222"}]}
    settled(store, local)


def test_poison_record_from_the_stream_goes_to_the_dead_letters(
    store: EndpointStore, local: LocalReconcilers
) -> None:
    east = local.regions[EAST]
    store.create("llama", SPEC, [EAST])
    real = east.handle

    def poisoned(event: dict[str, Any], context: Any) -> dict[str, Any]:
        event["Records"][0]["dynamodb"]["Keys"] = {}
        return real(event, context)

    east.poller.handler = poisoned
    local.pump()
    assert len(east.poller.dead_letters) == 1
    assert east.poller.dead_letters[0]["dynamodb"]["Keys"] == {}
