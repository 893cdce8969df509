"""A route change reaches the proxy's pods at once, not at the kubelet's next sync (docs/proxy.md).

The proxy pods' projected volume is modelled as the kubelet keeps it (`gco.local.region.volume`, an
injected clock: nothing here waits); the route keeper writes the shards through the real client
and the stand-in, then annotates every ready proxy pod, which makes its kubelet sync at once.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Iterator

import httpx
import pytest

from gco.local.region.router import ShardReader, proxy_pod, status_answer
from gco.local.region.volume import KUBELET_SYNC_S, MountedShards
from gco.local.standin import RUNNER_IDENTITY, StandInKubeAPI
from gco.reconcile.access import RECONCILER_GRANT, RUNNER_GRANT
from gco.reconcile.errors import ClusterAuthError
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
from gco.reconcile.objects import POD, SYSTEM_NAMESPACE
from gco.reconcile.proxy import route_keeper
from gco.reconcile.proxy.proxy_probe import REFRESH_ANNOTATION, PodProxyProbe
from gco.reconcile.proxy.route_changes import RouteChanges
from gco.reconcile.proxy.route_keeper import Published, RouteKeeper, RouteReport
from gco.reconcile.proxy.route_shards import route_digest, shard_of
from gco.reconcile.proxy.route_store import ConfigMapRouteStore
from gco.reconcile.proxy.routes import STATUS_PORT, STATUS_ROUTE_PATH, STATUS_SHARDS_PATH, Route

FAST = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.001)
RUNNER = "runner-token"
ROUTE = Route(endpoint="llama", path="/inference/llama", upstream="http://llama.gco-inference.svc:8000")


class Clock:
    """Monotonic seconds that move only when a test moves them."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Draw(random.Random):
    """A jitter draw fixed at `value`."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.fixture
def api() -> Iterator[StandInKubeAPI]:
    with StandInKubeAPI(token="t", identities={RUNNER: RUNNER_IDENTITY}, namespaces=["gco-system"]) as server:
        yield server


@pytest.fixture
def cluster(api: StandInKubeAPI) -> Iterator[KubeCluster]:
    client = KubeCluster(api.url, static_token("t"), retry=FAST, sleep=lambda _: None)
    yield client
    client.close()


def proxy(
    api: StandInKubeAPI, name: str, clock: Clock, *, ready: bool = True, asked: list[str] | None = None
) -> ShardReader:
    """A proxy pod whose status port answers from its mounted shards, as nginx serves them (each
    question, `<pod>:<port><path>`, appended to `asked`)."""
    reader = ShardReader(api, MountedShards(api, name, sync_s=KUBELET_SYNC_S, clock=clock, rng=Draw(0.5)))

    def answer(port: int, path: str) -> tuple[int, str]:
        if asked is not None:
            asked.append(f"{name}:{port}{path}")
        return status_answer(reader, port, path)

    api.register_pod(proxy_pod(name, ready), answer)
    reader.table()  # the kubelet mounted the volume when the pod started
    return reader


def served(reader: ShardReader) -> bool:
    return status_answer(reader, STATUS_PORT, STATUS_ROUTE_PATH + ROUTE.endpoint)[0] == 200


def keeper(cluster: KubeCluster, probe: PodProxyProbe | None = None) -> RouteKeeper:
    """A route keeper whose shards exist (as after the reconciler's start): a change is merged
    into its shard rather than the shard rebuilt from route Ingresses, which these tests have not."""
    routes = RouteKeeper(cluster, probe=probe)
    routes.rebuild()
    return routes


def changes() -> RouteChanges:
    routes = RouteChanges()
    routes.put(ROUTE.endpoint, ROUTE)
    return routes


def test_a_stored_shard_reaches_the_mounted_copy_at_the_kubelet_s_next_sync(
    api: StandInKubeAPI, cluster: KubeCluster
) -> None:
    """Without the annotation, the route waits for the periodic sync: 60 s plus the worker's jitter
    (a draw of 0.5 of the 0.5 factor: 75 s)."""
    clock = Clock()
    reader = proxy(api, "proxy-a", clock)
    keeper(cluster).refresh(changes())
    assert not served(reader)
    clock.now = 74.9
    assert not served(reader)
    clock.now = 75.0
    assert served(reader)


def test_a_pod_update_makes_its_kubelet_sync_at_once(api: StandInKubeAPI, cluster: KubeCluster) -> None:
    clock = Clock()
    reader = proxy(api, "proxy-a", clock)
    keeper(cluster).refresh(changes())
    assert api.annotate_pod(SYSTEM_NAMESPACE, "proxy-a", {"unrelated": "x"}) is not None
    assert served(reader)


def test_the_keeper_annotates_every_ready_proxy_pod_after_a_write_so_each_serves_the_route_now(
    api: StandInKubeAPI, cluster: KubeCluster
) -> None:
    clock = Clock()
    first, second = proxy(api, "proxy-a", clock), proxy(api, "proxy-b", clock)
    starting = proxy(api, "proxy-c", clock, ready=False)
    probe = PodProxyProbe(cluster, clock=lambda: 1700000000.0)
    keeper(cluster, probe).refresh(changes())  # two writes, two annotations: the rebuild's, the change's
    assert served(first) and served(second) and not served(starting)
    assert probe.unserved(ROUTE.endpoint, route_digest(ROUTE)) is None
    pods = {pod["metadata"]["name"]: pod["metadata"] for pod in api.pods(SYSTEM_NAMESPACE, "")}
    assert pods["proxy-a"]["annotations"] == {REFRESH_ANNOTATION: "1700000000.000-2"}
    assert pods["proxy-b"]["annotations"] == {REFRESH_ANNOTATION: "1700000000.000-2"}
    assert "annotations" not in pods["proxy-c"]
    assert clock.now == 0.0  # served with no time passing: not the periodic sync


def test_a_pod_still_behind_is_annotated_again_when_asked(api: StandInKubeAPI, cluster: KubeCluster) -> None:
    """A kubelet may sync the pod before its ConfigMap watch has the shard: the probe's look finds
    the pod behind and annotates it again, with a new value (an equal one would be no update)."""
    clock = Clock()
    reader = proxy(api, "proxy-a", clock)
    probe = PodProxyProbe(cluster, clock=lambda: 5.0)
    keeper(cluster).refresh(changes())  # stored, no annotation: the pod is behind
    before = api.pod_version(SYSTEM_NAMESPACE, "proxy-a")
    assert probe.unserved(ROUTE.endpoint, route_digest(ROUTE)) == (
        "waiting for the proxy to serve the route (1 of 1 proxy pods)"
    )
    assert api.pod_version(SYSTEM_NAMESPACE, "proxy-a") != before
    assert served(reader)
    assert probe.unserved(ROUTE.endpoint, route_digest(ROUTE)) is None


def test_annotating_proxy_pods_is_patch_of_pods_in_the_system_namespace_only(api: StandInKubeAPI) -> None:
    assert RECONCILER_GRANT.allows("patch", POD.group, POD.plural, SYSTEM_NAMESPACE, "proxy-a")
    assert not RECONCILER_GRANT.allows("patch", POD.group, POD.plural, "gco-inference", "engine-0")
    assert not RUNNER_GRANT.allows("patch", POD.group, POD.plural, SYSTEM_NAMESPACE, "proxy-a")
    api.register_pod(proxy_pod("proxy-a", True), lambda port, path: (404, ""))
    runner = KubeCluster(api.url, static_token(RUNNER), retry=FAST, sleep=lambda _: None)
    with pytest.raises(ClusterAuthError, match="pods"):
        runner.annotate_pod(SYSTEM_NAMESPACE, "proxy-a", {REFRESH_ANNOTATION: "1"})
    runner.close()
    assert [(a.verb, a.rbac_resource) for a in api.forbidden] == [("patch", "pods")]


def test_a_gone_pod_is_not_an_error(cluster: KubeCluster) -> None:
    assert cluster.annotate_pod(SYSTEM_NAMESPACE, "proxy-gone", {REFRESH_ANNOTATION: "1"}) is False


def test_a_refused_annotation_is_logged_and_the_shard_stays_written(
    api: StandInKubeAPI, cluster: KubeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The annotation only speeds the route up: the periodic sync still brings it."""
    clock = Clock()
    reader = proxy(api, "proxy-a", clock)
    runner = KubeCluster(api.url, static_token(RUNNER), retry=FAST, sleep=lambda _: None)
    with caplog.at_level(logging.WARNING):
        keeper(cluster, PodProxyProbe(runner)).refresh(changes())
    runner.close()
    assert "could not have the proxy's pods load the route shards now" in caplog.text
    assert not served(reader)
    clock.now = 75.0
    assert served(reader)


def test_with_no_sync_period_the_stored_shards_are_read(api: StandInKubeAPI, cluster: KubeCluster) -> None:
    reader = ShardReader(api, MountedShards(api, "proxy-a", sync_s=0.0, clock=Clock()))
    keeper(cluster).refresh(changes())
    assert served(reader)


def test_the_stand_in_serves_only_merge_patches_of_a_pod_s_annotations(api: StandInKubeAPI) -> None:
    api.register_pod(proxy_pod("proxy-a", True), lambda port, path: (404, ""))
    url = f"{api.url}/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods/proxy-a"
    auth = {"Authorization": "Bearer t"}
    merge = {**auth, "Content-Type": "application/merge-patch+json"}
    labels = httpx.patch(url, json={"metadata": {"labels": {"a": "b"}}}, headers=merge)
    assert labels.status_code == 405
    applied = httpx.patch(url, json={"metadata": {"annotations": {"a": "b"}}}, headers=auth)
    assert applied.status_code == 415
    added = httpx.patch(url, json={"metadata": {"annotations": {"a": "b"}}}, headers=merge)
    assert added.status_code == 200 and added.json()["metadata"]["annotations"] == {"a": "b"}
    version = api.pod_version(SYSTEM_NAMESPACE, "proxy-a")
    same = httpx.patch(url, json={"metadata": {"annotations": {"a": "b"}}}, headers=merge)
    assert same.status_code == 200 and api.pod_version(SYSTEM_NAMESPACE, "proxy-a") == version  # no change
    gone = httpx.patch(url, json={"metadata": {"annotations": {"a": None}}}, headers=merge)
    assert gone.json()["metadata"]["annotations"] == {}
    assert api.pod_version(SYSTEM_NAMESPACE, "proxy-a") != version


def test_a_pod_behind_on_several_routes_is_annotated_once(api: StandInKubeAPI, cluster: KubeCluster) -> None:
    clock = Clock()
    reader = proxy(api, "proxy-a", clock)
    other = Route(
        endpoint="mistral", path="/inference/mistral", upstream="http://mistral.gco-inference.svc:8000"
    )
    both = changes()
    both.put(other.endpoint, other)
    keeper(cluster).refresh(both)  # stored, no annotation: the pod is behind on both routes
    probe = PodProxyProbe(cluster, clock=lambda: 5.0)
    before = api.requests["PATCH"]
    answers = probe.unserved_all({ROUTE.endpoint: route_digest(ROUTE), other.endpoint: route_digest(other)})
    assert answers == dict.fromkeys(
        [ROUTE.endpoint, other.endpoint], "waiting for the proxy to serve the route (1 of 1 proxy pods)"
    )
    assert api.requests["PATCH"] - before == 1  # one annotation for the pod, not one per route
    assert served(reader)


def test_publish_reports_the_pods_it_told_and_waits_for_a_running_refresh_to_store_its_changes(
    api: StandInKubeAPI, cluster: KubeCluster
) -> None:
    clock = Clock()
    reader = proxy(api, "proxy-a", clock)
    routes = keeper(cluster, PodProxyProbe(cluster))
    assert routes.publish(changes()).pods == ("proxy-a",)
    assert served(reader)
    other = RouteChanges()
    other.put(ROUTE.endpoint, None)
    answers: list[Published] = []
    routes._lock.acquire()  # another thread is refreshing: it stores what is recorded before it lets go
    try:
        publishing = threading.Thread(target=lambda: answers.append(routes.publish(other)))
        publishing.start()
        publishing.join(timeout=0.2)
        assert publishing.is_alive() and not answers  # waiting for the holder, not asking too early
        assert stored_endpoints(cluster) == {ROUTE.endpoint}  # not written by the waiting call
        routes._refresh_pending_locked(RouteReport())  # the holder's loop takes the recorded change
    finally:
        routes._lock.release()
    publishing.join(timeout=30)
    assert answers == [Published()]  # the holder told the pods; the caller lists them when it asks
    assert stored_endpoints(cluster) == set()
    assert not served(reader)


def test_publish_stores_what_other_batches_left_pending(api: StandInKubeAPI, cluster: KubeCluster) -> None:
    """A batch that changed no route still publishes before it asks: its endpoints' routes may be
    among the changes an earlier batch left to the last batch running (`end_batch`)."""
    clock = Clock()
    reader = proxy(api, "proxy-a", clock)
    routes = keeper(cluster, PodProxyProbe(cluster))
    routes.begin_batch()  # a batch still running: the ending one leaves its change to it
    routes.begin_batch()
    routes.end_batch(changes())
    assert stored_endpoints(cluster) == set()
    assert routes.publish(RouteChanges()).pods == ("proxy-a",)  # the running batch asks next
    assert stored_endpoints(cluster) == {ROUTE.endpoint}
    assert served(reader)
    routes.end_batch(RouteChanges())


def test_publish_gives_up_waiting_after_its_bound(
    api: StandInKubeAPI, cluster: KubeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(route_keeper, "PUBLISH_WAIT_S", 0.01)
    routes = keeper(cluster, PodProxyProbe(cluster))
    with routes._lock:  # a refresh that does not let go in time: the change stays recorded for it
        assert routes.publish(changes()) == Published()
        assert stored_endpoints(cluster) == set()
    routes.refresh(RouteChanges())
    assert stored_endpoints(cluster) == {ROUTE.endpoint}


def stored_endpoints(cluster: KubeCluster) -> set[str]:
    shards = ConfigMapRouteStore(cluster).read_all().values()
    return {route.endpoint for shard in shards if shard.table for route in shard.table.routes}


def test_one_question_a_pod_settles_every_route_of_shards_it_loaded_as_written(
    api: StandInKubeAPI, cluster: KubeCluster
) -> None:
    """After `publish`, each pod is asked once for the shard versions it loaded; the routes in shards
    it loaded at the versions the keeper wrote need no question of their own."""
    clock = Clock()
    asked: list[str] = []
    readers = [proxy(api, name, clock, asked=asked) for name in ("proxy-a", "proxy-b")]
    routes = keeper(cluster, PodProxyProbe(cluster))
    other = Route(
        endpoint="mistral", path="/inference/mistral", upstream="http://mistral.gco-inference.svc:8000"
    )
    both = changes()
    both.put(other.endpoint, other)
    published = routes.publish(both)
    held = routes.versions_holding([ROUTE, other])
    assert {version.shard for version in held.values()} == {
        shard_of(ROUTE.endpoint),
        shard_of(other.endpoint),
    }
    for reader in readers:
        assert {shard: reader.versions()[shard] for shard in (v.shard for v in held.values())} == {
            version.shard: version.version for version in held.values()
        }
    asked.clear()
    assert routes.unserved_all([ROUTE, other], published.pods) == {ROUTE.endpoint: None, other.endpoint: None}
    assert sorted(asked) == [  # each pod once, asked concurrently (in either order)
        f"proxy-a:{STATUS_PORT}{STATUS_SHARDS_PATH}",
        f"proxy-b:{STATUS_PORT}{STATUS_SHARDS_PATH}",
    ]


def test_a_route_whose_shard_changed_since_is_asked_about_alone_and_a_pod_behind_is_found(
    api: StandInKubeAPI, cluster: KubeCluster
) -> None:
    """Another process's keeper wrote the shard after this one, and the pod loaded that: its version
    is not the one this keeper knows, so the route is asked about alone (and answered exactly). A
    route the pod has not loaded at all is found behind."""
    clock = Clock()
    asked: list[str] = []
    reader = proxy(api, "proxy-a", clock, asked=asked)
    routes = keeper(cluster, PodProxyProbe(cluster))
    routes.publish(changes())
    assert served(reader)
    first, second = (
        Route(endpoint=name, path=f"/inference/{name}", upstream=f"http://{name}.gco-inference.svc:8000")
        for name in [
            f"n{index}" for index in range(1000) if shard_of(f"n{index}") == shard_of(ROUTE.endpoint)
        ][:2]
    )
    elsewhere = RouteKeeper(cluster)  # another process's keeper
    added = RouteChanges()
    added.put(first.endpoint, first)
    elsewhere.refresh(added)
    assert api.annotate_pod(SYSTEM_NAMESPACE, "proxy-a", {"synced": "1"}) is not None  # loads it
    asked.clear()
    assert routes.unserved_all([ROUTE]) == {ROUTE.endpoint: None}
    assert asked == [
        f"proxy-a:{STATUS_PORT}{STATUS_SHARDS_PATH}",
        f"proxy-a:{STATUS_PORT}{STATUS_ROUTE_PATH}{ROUTE.endpoint}",
    ]
    added = RouteChanges()
    added.put(second.endpoint, second)
    elsewhere.refresh(added)  # stored, the pod not told: it still serves the shard without it
    reread = RouteKeeper(cluster, probe=PodProxyProbe(cluster))
    reread.refresh(added)  # nothing to write: it reads the shard, and knows it as stored now
    asked.clear()
    assert reread.unserved_all([second]) == {
        second.endpoint: "waiting for the proxy to serve the route (1 of 1 proxy pods)"
    }
    assert asked[:2] == [
        f"proxy-a:{STATUS_PORT}{STATUS_SHARDS_PATH}",
        f"proxy-a:{STATUS_PORT}{STATUS_ROUTE_PATH}{second.endpoint}",
    ]


def test_a_route_the_keeper_holds_otherwise_gets_no_version(
    api: StandInKubeAPI, cluster: KubeCluster
) -> None:
    routes = keeper(cluster)
    routes.refresh(changes())
    moved = Route(endpoint=ROUTE.endpoint, path=ROUTE.path, upstream="http://llama-2.gco-inference.svc:8000")
    assert set(routes.versions_holding([ROUTE])) == {ROUTE.endpoint}
    assert routes.versions_holding([moved]) == {}
