"""What a new endpoint costs in Kubernetes API-server calls, counted by the stand-in API server.

The stand-in counts every request it serves (`StandInKubeAPI.requests`, `lists`), so these tests
fail if a change adds a call to the path of a new endpoint. `docs/scale.md` has the table of what
each call is for. The proxy's pods are registered with the stand-in and answer the route digests of
the shards their kubelet mounted (`gco.local.region.volume`, synced when a pod is annotated, on an
injected clock), as the reachability probe asks them in EKS.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gco.endpoints import EndpointStore
from gco.local.region.router import ShardReader, proxy_pod, status_answer
from gco.local.region.volume import KUBELET_SYNC_S, MountedShards
from gco.local.standin import StandInKubeAPI
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
from gco.reconcile.proxy.proxy_probe import PodProxyProbe
from gco.reconcile.proxy.route_changes import RouteChanges
from gco.reconcile.proxy.route_shards import shard_of
from gco.reconcile.reconciler import Reconciler
from tests.unit.reconcile.records import EAST, IMAGE

SPEC = {"image": IMAGE, "model_id": "m"}
# A new endpoint renders 5 objects (Deployment, Service, PodDisruptionBudget, NetworkPolicy, route
# Ingress), and its objects are listed in 7 scopes (`Grant.object_scopes`).
OBJECTS = 5
SCOPES = 7


class Clock:
    """Monotonic seconds that move only when a test moves them (nothing here waits)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Draw(random.Random):
    """The kubelet's sync jitter fixed at the middle of its range."""

    def random(self) -> float:
        return 0.5


@pytest.fixture
def api() -> Iterator[StandInKubeAPI]:
    with StandInKubeAPI(token="t") as server:
        yield server


@pytest.fixture
def cluster(api: StandInKubeAPI) -> Iterator[KubeCluster]:
    retry = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.001)
    client = KubeCluster(api.url, static_token("t"), retry=retry, sleep=lambda _: None)
    yield client
    client.close()


def answering(reader: ShardReader) -> Callable[[int, str], tuple[int, str]]:
    """A proxy pod's status port, answering from the shards its kubelet mounted."""
    return lambda port, path: status_answer(reader, port, path)


def proxies(api: StandInKubeAPI, count: int) -> None:
    """`count` ready proxy pods answering from their mounted shards (loaded when annotated)."""
    clock = Clock()
    for index in range(count):
        name = f"proxy-{index}"
        reader = ShardReader(api, MountedShards(api, name, sync_s=KUBELET_SYNC_S, clock=clock, rng=Draw()))
        api.register_pod(proxy_pod(name, True), answering(reader))
        reader.table()  # mounted when the pod started


def calls(api: StandInKubeAPI) -> dict[str, int]:
    return {method: count for method, count in api.requests.items() if count}


def reads(endpoints: int) -> int:
    """The GETs of a batch of new endpoints before any question to the proxy. A batch of one lists
    its objects in each scope and reads each rendered name before its first apply; a larger batch
    lists its endpoints' objects and, in the same round, the objects without an endpoint's label,
    in each scope: a name neither list shows held is free, with no read of its own
    (`ownership.claim`)."""
    return SCOPES + OBJECTS if endpoints == 1 else 2 * SCOPES


@pytest.mark.parametrize("endpoints", [1, 10])
def test_a_batch_of_new_endpoints_costs_these_calls_without_a_proxy_to_ask(
    store: EndpointStore, api: StandInKubeAPI, cluster: KubeCluster, endpoints: int
) -> None:
    reconciler = Reconciler(store, cluster, EAST, wait=0.0)
    reconciler.ensure_system()
    names = [f"new-{index}" for index in range(endpoints)]
    for name in names:
        store.create(name, SPEC, [EAST])
    api.requests.clear()
    outcomes = reconciler.reconcile_many(names, wait=0.0, concurrency=endpoints)
    assert {name: future.result().kind for name, future in outcomes.items()} == dict.fromkeys(names, "done")
    shards = len({shard_of(name) for name in names})
    # GET: the batch's lists and claims (`reads`); PATCH: each object's apply, one merge of each
    # route shard touched.
    assert calls(api) == {"GET": reads(endpoints), "PATCH": OBJECTS * endpoints + shards}


@pytest.mark.parametrize(("endpoints", "pods"), [(1, 2), (10, 2), (10, 3)])
def test_a_batch_of_new_endpoints_costs_these_calls_with_the_proxy_asked(
    store: EndpointStore, api: StandInKubeAPI, cluster: KubeCluster, endpoints: int, pods: int
) -> None:
    """The batch merges its routes into their shards once, tells each proxy pod once, and asks
    each pod once for the shard versions it loaded, which settles every route of the batch (the
    pods loaded the shards as the batch wrote them); an endpoint reported running is never asked
    again."""
    proxies(api, pods)
    reconciler = Reconciler(store, cluster, EAST, probe=PodProxyProbe(cluster), wait=0.0)
    reconciler.ensure_system()
    names = [f"new-{index}" for index in range(endpoints)]
    for name in names:
        store.create(name, SPEC, [EAST])
    shards = len({shard_of(name) for name in names})

    api.requests.clear()
    first = reconciler.reconcile_many(names, wait=0.0, concurrency=endpoints)
    assert {name: future.result().kind for name, future in first.items()} == dict.fromkeys(names, "done")
    # GET: the batch's lists and claims (`reads`), one list of the proxy's pods, each pod asked
    # once (`GET /shards`); PATCH: each object's apply, each touched shard's merge, each proxy
    # pod's annotation.
    assert calls(api) == {
        "GET": reads(endpoints) + 1 + pods,
        "PATCH": OBJECTS * endpoints + shards + pods,
    }

    api.requests.clear()
    again = reconciler.reconcile_many(names, wait=0.0, concurrency=endpoints)
    assert {name: future.result().kind for name, future in again.items()} == dict.fromkeys(names, "done")
    # running already: only the batch's lists (a batch of one lists only its own objects)
    assert calls(api) == {"GET": SCOPES if endpoints == 1 else 2 * SCOPES}


def store_calls(store: EndpointStore) -> dict[str, int]:
    """The DynamoDB calls the store's client makes from now on, by operation (live: read it later)."""
    made: dict[str, int] = {}

    def count(model: Any, **_: Any) -> None:
        made[model.name] = made.get(model.name, 0) + 1

    store.client.meta.events.register("before-parameter-build.dynamodb", count)
    return made


@pytest.mark.parametrize("endpoints", [1, 10])
def test_a_batch_reads_its_records_in_one_call(
    store: EndpointStore, api: StandInKubeAPI, cluster: KubeCluster, endpoints: int
) -> None:
    """One strongly consistent BatchGetItem for the batch's first passes (one GetItem for a batch of
    one), then each endpoint's one status write (`running`: the proxy was asked in the same batch)."""
    proxies(api, 2)
    reconciler = Reconciler(store, cluster, EAST, probe=PodProxyProbe(cluster), wait=0.0)
    reconciler.ensure_system()
    names = [f"new-{index}" for index in range(endpoints)]
    for name in names:
        store.create(name, SPEC, [EAST])
    made = store_calls(store)
    outcomes = reconciler.reconcile_many(names, wait=0.0, concurrency=endpoints)
    assert {name: future.result().kind for name, future in outcomes.items()} == dict.fromkeys(names, "done")
    read = {"BatchGetItem": 1} if endpoints > 1 else {"GetItem": 1}
    assert made == {**read, "UpdateItem": endpoints}
    assert {store.get(name).region_status[EAST].state for name in names} == {"running"}  # type: ignore[union-attr]


def test_an_endpoint_ready_in_a_later_batch_is_served_by_the_route_an_earlier_batch_left_pending(
    store: EndpointStore,
) -> None:
    """Its route change was left to a batch still running (`end_batch`); the batch that finds it
    ready publishes what is pending before it asks the proxy, so it is `running` at once, not
    `creating` with "waiting for the proxy" and reconciled again on the echo."""
    clock = Clock()
    with StandInKubeAPI(token="t", ready_delay=5.0, clock=clock) as api:
        proxies(api, 2)
        retry = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.001)
        cluster = KubeCluster(api.url, static_token("t"), retry=retry, sleep=lambda _: None)
        reconciler = Reconciler(store, cluster, EAST, probe=PodProxyProbe(cluster), wait=0.0)
        reconciler.ensure_system()
        store.create("late", SPEC, [EAST])
        reconciler.routes.begin_batch()  # another batch of this process runs throughout
        first = reconciler.reconcile("late", wait=0.0)
        assert first.kind == "requeue" and store.get("late").region_status[EAST].state == "creating"  # type: ignore[union-attr]
        assert reconciler.routes._pending.stale  # left to the batch still running
        clock.now = 10.0  # the replicas are ready now
        second = reconciler.reconcile("late", wait=0.0)
        status = store.get("late").region_status[EAST]  # type: ignore[union-attr]
        assert (second.kind, status.state) == ("done", "running")
        reconciler.routes.end_batch(RouteChanges())
        cluster.close()
