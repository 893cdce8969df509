"""A stopped endpoint stays stopped over the local stack run from the synthesized app: an update and a
canary change what it will run when started; no engine starts and every Deployment keeps 0 replicas
meanwhile, across the deployed sweep's reconciles."""

from __future__ import annotations

from gco.endpoints import EndpointStore, canary, operations
from gco.local.region.cluster import LocalClusters
from gco.reconcile.objects import DEPLOYMENT
from tests.functional.local.conftest import eventually, sweep_region
from tests.functional.local.test_canary import CANARY_IMAGE
from tests.functional.local.test_engines import SPEC, engines, running, stopped_in
from tests.unit.reconcile.records import EAST


def deployment_replicas(clusters: LocalClusters) -> dict[str, int]:
    api = clusters.reconcilers.regions[EAST].api
    return {
        obj["metadata"]["name"]: int(obj["spec"].get("replicas", -1))
        for obj in api.endpoint_objects()
        if obj["kind"] == DEPLOYMENT.kind
    }


def test_update_and_canary_of_a_stopped_endpoint_leave_zero_replicas(
    store: EndpointStore, clusters: LocalClusters
) -> None:
    store.create("smol", SPEC, [EAST])
    eventually(lambda: running(store, "smol", EAST, 1), "smol running")
    operations.stop(store, "smol")
    eventually(lambda: stopped_in(store, EAST) and not engines(clusters, EAST), "smol stopped, no engine")

    assert operations.update_spec(store, "smol", {"replicas": 2}).desired_state == "stopped"
    assert canary.set_canary(store, "smol", CANARY_IMAGE, 30).desired_state == "stopped"
    eventually(lambda: set(deployment_replicas(clusters)) == {"smol", "smol--canary"}, "the canary rendered")
    for _ in range(3):  # the deployed sweep reconciles after the changes: still nothing runs
        sweep_region(clusters, EAST)
    assert deployment_replicas(clusters) == {"smol": 0, "smol--canary": 0}
    assert engines(clusters, EAST) == [] and stopped_in(store, EAST)
    record = store.get("smol")
    assert record is not None and record.desired_state == "stopped" and record.spec.replicas == 2

    operations.start(store, "smol")  # what it runs once started: the updated spec and its canary
    eventually(lambda: running(store, "smol", EAST, 3), "2 replicas and the canary running")
