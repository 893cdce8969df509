"""Routes at scale against the stand-in's API server limits, and the proxy asked what it serves.

The stand-in refuses what the API server refuses (`gco.local.standin.limits`): the single route
ConfigMap of before would have been refused at about 2,000 endpoints; the shards of 10,000 are not.
The reconciler asks every ready proxy pod, through the pod proxy, whether it serves a route.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gco.endpoints import EndpointStore
from gco.endpoints.names import ENDPOINT_NAME_MAX
from gco.local.region.router import proxy_pod
from gco.local.standin import RUNNER_IDENTITY, StandInKubeAPI
from gco.reconcile.errors import ClusterAuthError
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
from gco.reconcile.objects import CONFIG_MAP, DEPLOYMENT, SYSTEM_NAMESPACE
from gco.reconcile.proxy.proxy_probe import PodProxyProbe
from gco.reconcile.proxy.render_proxy import PROXY_DEPLOYMENT
from gco.reconcile.proxy.route_shards import route_digest, shard_config_map, split
from gco.reconcile.proxy.route_store import ConfigMapRouteStore
from gco.reconcile.proxy.routes import STATUS_PORT, Route, RouteTable
from gco.reconcile.reconciler import Reconciler
from tests.unit.reconcile.records import EAST, IMAGE

FAST = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.001)
RUNNER = "runner-token"


@pytest.fixture
def api() -> Iterator[StandInKubeAPI]:
    with StandInKubeAPI(token="t", identities={RUNNER: RUNNER_IDENTITY}, namespaces=["gco-system"]) as server:
        yield server


@pytest.fixture
def cluster(api: StandInKubeAPI) -> Iterator[KubeCluster]:
    client = KubeCluster(api.url, static_token("t"), retry=FAST, sleep=lambda _: None)
    yield client
    client.close()


def longest_routes(count: int) -> RouteTable:
    routes = []
    for index in range(count):
        name = f"e{index:05d}".ljust(ENDPOINT_NAME_MAX, "x")
        routes.append(
            Route(
                endpoint=name,
                path=f"/inference/{name}",
                upstream=f"http://{name}.gco-inference.svc:8000",
                canary_upstream=f"http://{name}--canary.gco-inference.svc:8000",
                canary_weight=10,
            )
        )
    return RouteTable(routes=tuple(routes))


def config_map(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE},
        "data": data,
    }


def test_a_configmap_over_one_mebibyte_is_refused_and_nothing_is_stored(cluster: KubeCluster) -> None:
    """One ConfigMap of every route (as the proxy had) at 3,000 long-named endpoints: refused (422)."""
    table = longest_routes(3000)
    whole = json.dumps(table.model_dump(mode="json"))
    assert len(whole) > 1024 * 1024
    with pytest.raises(Exception, match=r"Too long: must have at most 1048576 bytes"):
        cluster.apply(config_map("every-route", {"routes.json": whole}))
    assert cluster.get(CONFIG_MAP, SYSTEM_NAMESPACE, "every-route") is None


def test_ten_thousand_routes_of_the_longest_names_are_stored_in_shards(cluster: KubeCluster) -> None:
    store = ConfigMapRouteStore(cluster)
    table = longest_routes(10_000)
    for shard, part in split(table).items():
        store.write(shard, part, version=None)
    stored = store.read_all()
    assert sum(len(shard.table.routes) for shard in stored.values() if shard.table) == 10_000


@pytest.mark.parametrize(
    ("change", "limit"),
    [
        ({"metadata": {"name": "x" * 254}}, "metadata.name: Too long: must have at most 253 characters"),
        ({"metadata": {"labels": {"a": "v" * 64}}}, "metadata.labels[a]: Too long: must have at most 63"),
        ({"metadata": {"labels": {"k" * 64: "v"}}}, "name part must be no more than 63 characters"),
        ({"metadata": {"labels": {"p" * 254 + "/k": "v"}}}, "prefix part must be no more than 253"),
        (
            {"metadata": {"annotations": {"a": "v" * (256 * 1024)}}},
            "metadata.annotations: Too long: must have at most 262144 bytes",
        ),
    ],
    ids=["name", "label-value", "label-key", "label-prefix", "annotations"],
)
def test_names_labels_and_annotations_over_their_limits_are_refused(
    api: StandInKubeAPI, change: dict[str, Any], limit: str
) -> None:
    obj = config_map("small", {"a": "b"})
    obj["metadata"] = {**obj["metadata"], **change["metadata"]}
    name = obj["metadata"]["name"]
    response = httpx.patch(
        f"{api.url}/api/v1/namespaces/{SYSTEM_NAMESPACE}/configmaps/{name}",
        params={"fieldManager": "gco"},
        headers={"Authorization": "Bearer t", "Content-Type": "application/apply-patch+yaml"},
        content=json.dumps(obj),
    )
    assert response.status_code == 422 and limit in response.json()["message"]
    assert api.get(CONFIG_MAP, SYSTEM_NAMESPACE, name) is None


def test_a_service_name_over_a_dns_label_and_a_body_over_three_mebibytes_are_refused(
    api: StandInKubeAPI,
) -> None:
    headers = {"Authorization": "Bearer t", "Content-Type": "application/apply-patch+yaml"}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s" * 64, "namespace": "gco-system"},
    }
    response = httpx.patch(
        f"{api.url}/api/v1/namespaces/gco-system/services/{'s' * 64}",
        params={"fieldManager": "gco"},
        headers=headers,
        content=json.dumps(service),
    )
    assert response.status_code == 422 and "at most 63 characters" in response.json()["message"]
    big = config_map("big", {"a": "x" * (3 * 1024 * 1024)})
    response = httpx.patch(
        f"{api.url}/api/v1/namespaces/gco-system/configmaps/big",
        params={"fieldManager": "gco"},
        headers=headers,
        content=json.dumps(big),
    )
    assert response.status_code == 413
    assert response.json()["message"] == "Request entity too large: limit is 3145728"


def registered(api: StandInKubeAPI, name: str, digest: str | None, ready: bool = True) -> list[str]:
    """A proxy pod answering `digest` for every route (None: no route); returns the paths asked."""
    asked: list[str] = []

    def serve(port: int, path: str) -> tuple[int, str]:
        asked.append(f"{port}{path}")
        return (200, f"{digest}\n") if digest is not None else (404, "no route\n")

    api.register_pod(proxy_pod(name, ready), serve)
    return asked


def test_the_probe_asks_every_ready_proxy_pod_through_the_pod_proxy(
    api: StandInKubeAPI, cluster: KubeCluster
) -> None:
    probe = PodProxyProbe(cluster)
    assert probe.unserved("llama", "d1") == "no proxy pod is ready"
    first = registered(api, "proxy-a", "d1")
    behind = registered(api, "proxy-b", "d0")
    skipped = registered(api, "proxy-c", None, ready=False)
    assert probe.unserved("llama", "d1") == "waiting for the proxy to serve the route (1 of 2 proxy pods)"
    assert first == behind == [f"{STATUS_PORT}/routes/llama"] and skipped == []
    registered(api, "proxy-b", "d1")
    assert probe.unserved("llama", "d1") is None


def test_the_pod_proxy_is_authorized_as_get_of_pods_proxy(api: StandInKubeAPI) -> None:
    registered(api, "proxy-a", "d1")
    runner = KubeCluster(api.url, static_token(RUNNER), retry=FAST, sleep=lambda _: None)
    with pytest.raises(ClusterAuthError, match="pods/proxy"):
        runner.proxy_get(SYSTEM_NAMESPACE, "proxy-a", STATUS_PORT, "/routes/llama")
    assert [(a.verb, a.rbac_resource) for a in api.forbidden] == [("get", "pods/proxy")]
    runner.close()


def test_running_waits_for_the_proxy_and_a_route_change_leaves_the_proxy_deployment_alone(
    api: StandInKubeAPI, cluster: KubeCluster, store: EndpointStore
) -> None:
    """The route is stored, but a proxy pod that has not loaded it keeps the endpoint `creating`
    with the reason; once it serves it, `running`. The proxy's Deployment is never written for it."""
    answers: dict[str, str] = {}

    def serve(port: int, path: str) -> tuple[int, str]:
        digest = answers.get(path)
        return (200, digest + "\n") if digest else (404, "no route\n")

    api.register_pod(proxy_pod("proxy-a", True), serve)
    reconciler = Reconciler(store, cluster, EAST, probe=PodProxyProbe(cluster), wait=0.0)
    reconciler.ensure_system()
    deployment = api.get(DEPLOYMENT, SYSTEM_NAMESPACE, PROXY_DEPLOYMENT)
    assert deployment is not None
    store.create("llama", {"image": IMAGE, "model_id": "m"}, [EAST])
    outcome = reconciler.reconcile("llama")
    record = store.get("llama")
    assert record is not None and outcome.kind == "requeue"
    status = record.region_status[EAST]
    assert status.state == "creating"
    assert (status.model_extra or {}).get(
        "reason"
    ) == "waiting for the proxy to serve the route (1 of 1 proxy pods)"
    stored = ConfigMapRouteStore(cluster).read_all()
    [route] = [route for shard in stored.values() if shard.table for route in shard.table.routes]
    answers["/routes/llama"] = route_digest(route)
    assert reconciler.reconcile("llama").kind == "done"
    record = store.get("llama")
    assert record is not None and record.region_status[EAST].state == "running"
    after = api.get(DEPLOYMENT, SYSTEM_NAMESPACE, PROXY_DEPLOYMENT)
    assert after is not None
    assert after["metadata"]["resourceVersion"] == deployment["metadata"]["resourceVersion"]  # nothing rolled


def test_a_shard_configmap_is_what_the_store_writes(cluster: KubeCluster) -> None:
    table = longest_routes(3)
    [(shard, part)] = [(s, p) for s, p in split(table).items() if p.routes][:1]
    written = ConfigMapRouteStore(cluster).write(shard, part, version=None)
    stored = cluster.get(CONFIG_MAP, SYSTEM_NAMESPACE, shard_config_map(shard, part)["metadata"]["name"])
    assert stored is not None and stored["data"] == shard_config_map(shard, part)["data"]
    assert written.table == part and written.version == stored["metadata"]["resourceVersion"]
