"""End to end over the moto server's DynamoDB stream and two stand-in API servers over HTTP:
deploy in two Regions, update, scale, stop, start, remove a Region, re-add it, delete, purge.

Replaying the stream runs the synthesized app's functions (`deployed_local`). The rest run the
reconciler library in this process (`local`): they read the reports its in-process `sweep()` returns,
or read `running` right after one `pump()`, which the library's readiness wait gives and the deployed
stream function does not (it reports `creating`; its next sweep reports `running`)."""

from __future__ import annotations

from typing import Any

from gco.endpoints import EndpointRecord, EndpointStore
from gco.local.region.poller import StreamPoller
from gco.local.region.reconcilers import LocalReconcilers
from gco.reconcile.objects import GENERATION_ANNOTATION, LIFECYCLE_ANNOTATION
from gco.reconcile.render import render
from tests.unit.reconcile.records import EAST, IMAGE, WEST

SPEC: dict[str, Any] = {"image": IMAGE, "model_id": "meta-llama/Llama-3.1-8B-Instruct"}


def status(store: EndpointStore, name: str = "llama") -> dict[str, tuple[str, int, int]]:
    record = store.get(name)
    assert record is not None
    return {
        region: (item.state, item.replicas_ready, item.replicas_desired)
        for region, item in record.region_status.items()
    }


def deployments(local: LocalReconcilers, region: str) -> dict[str, dict[str, Any]]:
    return {
        obj["metadata"]["name"]: obj
        for obj in local.regions[region].api.endpoint_objects()
        if obj["kind"] == "Deployment"
    }


def keys(local: LocalReconcilers, region: str) -> set[tuple[str, str, str]]:
    return {
        (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        for obj in local.regions[region].api.endpoint_objects()
    }


def expected_keys(record: EndpointRecord, region: str) -> set[tuple[str, str, str]]:
    return {
        (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"]) for obj in render(record, region)
    }


def current(store: EndpointStore) -> EndpointRecord:
    record = store.get("llama")
    assert record is not None
    return record


def test_full_lifecycle_in_two_regions(store: EndpointStore, local: LocalReconcilers) -> None:
    record = store.create("llama", SPEC, [EAST, WEST])
    lifecycle_id = record.lifecycle_id
    assert lifecycle_id is not None
    local.pump()
    assert status(store) == {EAST: ("running", 1, 1), WEST: ("running", 1, 1)}
    for region in (EAST, WEST):
        assert keys(local, region) == expected_keys(current(store), region)
        deployment = deployments(local, region)["llama"]
        annotations = deployment["metadata"]["annotations"]
        assert annotations[LIFECYCLE_ANNOTATION] == record.lifecycle_id
        assert annotations[GENERATION_ANNOTATION] == record.region_generations[region]

    updated = store.update_spec("llama", {**SPEC, "env": {"VLLM_LOGGING_LEVEL": "DEBUG"}}, lifecycle_id)
    assert updated is not None
    local.pump()
    env = deployments(local, EAST)["llama"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"} in env
    assert deployments(local, WEST)["llama"]["metadata"]["generation"] == 2

    store.scale("llama", 3, lifecycle_id)
    local.pump()
    assert status(store) == {EAST: ("running", 3, 3), WEST: ("running", 3, 3)}

    store.update_desired_state("llama", "stopped", expected_lifecycle_id=lifecycle_id)
    local.pump()
    assert status(store) == {EAST: ("stopped", 0, 0), WEST: ("stopped", 0, 0)}
    assert deployments(local, EAST)["llama"]["spec"]["replicas"] == 0
    assert not any(obj["kind"] == "PodDisruptionBudget" for obj in local.regions[EAST].api.endpoint_objects())

    store.start("llama", lifecycle_id)
    local.pump()
    assert status(store) == {EAST: ("running", 3, 3), WEST: ("running", 3, 3)}

    snapshot = current(store)
    west_token = snapshot.region_generations[WEST]
    store.update_target_regions(
        "llama",
        [EAST],
        expected_lifecycle_id=lifecycle_id,
        expected_updated_at=snapshot.updated_at or "",
    )
    local.pump()
    assert local.regions[WEST].api.endpoint_objects() == []
    removed = current(store).region_status[WEST]
    assert (removed.state, removed.region_generation) == ("deleted", west_token)
    assert status(store)[EAST] == ("running", 3, 3)

    snapshot = current(store)
    store.update_target_regions(
        "llama",
        [EAST, WEST],
        expected_lifecycle_id=lifecycle_id,
        expected_updated_at=snapshot.updated_at or "",
    )
    local.pump()
    rejoined = current(store)
    assert rejoined.region_generations[WEST] != west_token
    assert rejoined.region_status[WEST].region_generation == rejoined.region_generations[WEST]
    assert status(store)[WEST] == ("running", 3, 3)
    west_deployment = deployments(local, WEST)["llama"]
    assert (
        west_deployment["metadata"]["annotations"][GENERATION_ANNOTATION] == rejoined.region_generations[WEST]
    )

    store.update_desired_state("llama", "deleted")
    local.pump()
    assert store.get("llama") is None
    assert local.regions[EAST].api.endpoint_objects() == []
    assert local.regions[WEST].api.endpoint_objects() == []


def test_sweep_over_settled_endpoints_writes_nothing(store: EndpointStore, local: LocalReconcilers) -> None:
    for index in range(3):
        store.create(f"model-{index}", SPEC, [EAST, WEST])
    local.pump()
    before = {record.endpoint_name: record.updated_at for record in store.list()}
    writes = {region: stack.api.writes() for region, stack in local.regions.items()}
    reports = local.sweep()
    assert all(report.done == 3 for report in reports.values())
    assert {record.endpoint_name: record.updated_at for record in store.list()} == before
    assert {region: stack.api.writes() for region, stack in local.regions.items()} == writes
    assert local.pump() == 0  # no write means no stream record


def test_sweep_alone_converges_missed_events_and_drift(store: EndpointStore, local: LocalReconcilers) -> None:
    store.create("llama", SPEC, [EAST, WEST])  # no stream delivery: the sweep must do it all
    local.sweep()
    assert status(store) == {EAST: ("running", 1, 1), WEST: ("running", 1, 1)}
    api = local.regions[EAST].api
    deployment = deployments(local, EAST)["llama"]
    api.apply_as("gco-reconciler", {**deployment, "spec": {**deployment["spec"], "replicas": 7}})
    local.sweep()
    assert deployments(local, EAST)["llama"]["spec"]["replicas"] == 1
    orphan = {
        **deployment,
        "metadata": {**deployment["metadata"], "labels": {**deployment["metadata"]["labels"]}},
    }
    orphan["metadata"]["labels"]["gco.dev/endpoint"] = "ghost"
    orphan["metadata"]["name"] = "ghost"
    api.apply_as("gco-reconciler", orphan)
    reports = local.sweep()
    assert reports[EAST].orphans == 1
    assert "ghost" not in deployments(local, EAST)


def test_stale_events_after_a_replacement_lifecycle_change_nothing(
    store: EndpointStore, deployed_local: LocalReconcilers
) -> None:
    local = deployed_local  # the synthesized app's functions reconcile
    first = store.create("llama", SPEC, [EAST, WEST])
    local.pump()
    store.update_desired_state("llama", "deleted")
    local.pump()
    assert store.get("llama") is None
    second = store.create("llama", {**SPEC, "replicas": 2}, [EAST])
    local.pump()
    assert second.lifecycle_id != first.lifecycle_id
    settled = current(store)
    objects = {region: stack.api.endpoint_objects() for region, stack in local.regions.items()}
    # Every event of both lifecycles, delivered again from the start of the stream:
    for region, stack in local.regions.items():
        replay = StreamPoller(local.streams, local.stream_arn, stack.handle, region=region)
        assert replay.drain() > 0
    assert current(store).updated_at == settled.updated_at
    assert {region: stack.api.endpoint_objects() for region, stack in local.regions.items()} == objects
    assert objects[WEST] == []
    for obj in objects[EAST]:
        assert obj["metadata"]["annotations"][LIFECYCLE_ANNOTATION] == second.lifecycle_id


def test_objects_of_another_lifecycle_are_replaced_not_adopted(
    store: EndpointStore, local: LocalReconcilers
) -> None:
    old = store.create("llama", SPEC, [EAST])
    local.pump()
    leftovers = local.regions[EAST].api.endpoint_objects()
    # The record vanishes without a deletion (an operator's purge); a new lifecycle takes the name.
    store.client.delete_item(TableName=store.table_name, Key={"endpoint_name": {"S": "llama"}})
    new = store.create("llama", SPEC, [EAST])
    local.pump()
    objects = local.regions[EAST].api.endpoint_objects()
    assert {obj["metadata"]["uid"] for obj in objects}.isdisjoint(
        {obj["metadata"]["uid"] for obj in leftovers}
    )
    assert all(obj["metadata"]["annotations"][LIFECYCLE_ANNOTATION] == new.lifecycle_id for obj in objects)
    assert old.lifecycle_id != new.lifecycle_id
    assert status(store)[EAST] == ("running", 1, 1)
