"""The route refresh after a batch: the batch's own route changes merged into the proxy's ConfigMap
(no list of the routes), kept equal to a full rebuild, safe against concurrent refreshers (409 on a
stale resourceVersion, re-read and merged again), and rebuilt from the listed routes whenever the
ConfigMap cannot be trusted."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from gco.endpoints import EndpointStore
from gco.endpoints.record import EndpointRecord
from gco.local.standin import Fault, StandInKubeAPI
from gco.namespaces import SYSTEM_NAMESPACE
from gco.reconcile.errors import ClusterUnavailableError
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
from gco.reconcile.objects import CONFIG_MAP, INGRESS, Kind, ObjectRef, selector
from gco.reconcile.proxy.route_changes import RouteChanges
from gco.reconcile.proxy.route_keeper import MERGE_ATTEMPTS, ROUTE_REFRESH_MAX_DELAY, RouteKeeper
from gco.reconcile.proxy.route_shards import (
    TABLE_JSON,
    merged,
    shard_key,
    shard_labels,
    shard_name,
    shard_number,
    shard_of,
    shard_table,
)
from gco.reconcile.proxy.routes import route_table
from gco.reconcile.reconciler import Reconciler
from tests.unit.reconcile.records import EAST, IMAGE, WEST

SPEC: dict[str, Any] = {"image": IMAGE, "model_id": "m"}
FAST = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.001)
ROUTE_LIST = "gco.dev/role=route"  # what the route list's label selector contains


def _same_shard(count: int) -> list[str]:
    """Endpoint names, sorted, whose routes live in one shard (so their writers meet there)."""
    home = shard_of("r000")
    return [name for name in (f"r{n:03d}" for n in range(1000)) if shard_of(name) == home][:count]


A, B, C, D, E = _same_shard(5)
SHARD = shard_name(shard_of(A))


class HookedCluster(KubeCluster):
    """The real adapter, with a hook run once just before the next conditional ConfigMap apply (after
    the refresh read the ConfigMap), and ConfigMap reads that can be made to fail."""

    def __init__(self, api: StandInKubeAPI) -> None:
        super().__init__(api.url, static_token("t"), retry=FAST, sleep=lambda _: None)
        self.before_conditional_apply: Callable[[], None] | None = None
        self.failing_config_reads = 0

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        hook = self.before_conditional_apply
        if hook is not None and obj["kind"] == CONFIG_MAP.kind and obj["metadata"].get("resourceVersion"):
            self.before_conditional_apply = None
            hook()
        return super().apply(obj)

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        if kind == CONFIG_MAP and self.failing_config_reads:
            self.failing_config_reads -= 1
            raise ClusterUnavailableError("get ConfigMap: injected")
        return super().get(kind, namespace, name)


@pytest.fixture
def api() -> Iterator[StandInKubeAPI]:
    with StandInKubeAPI() as server:
        yield server


@pytest.fixture
def clusters(api: StandInKubeAPI) -> Iterator[list[HookedCluster]]:
    made: list[HookedCluster] = []
    yield made
    for cluster in made:
        cluster.close()


@pytest.fixture
def build(
    api: StandInKubeAPI, store: EndpointStore, clusters: list[HookedCluster]
) -> Callable[[], tuple[Reconciler, HookedCluster]]:
    """A reconciler of its own execution environment (its own client), started."""

    def make() -> tuple[Reconciler, HookedCluster]:
        cluster = HookedCluster(api)
        clusters.append(cluster)
        reconciler = Reconciler(store, cluster, EAST, wait=0.0)
        reconciler.ensure_system()
        return reconciler, cluster

    return make


def served(api: StandInKubeAPI) -> list[dict[str, Any]]:
    """The routes the shards hold, as one table."""
    tables = []
    for obj in api.list(CONFIG_MAP, SYSTEM_NAMESPACE, selector(shard_labels()))[0]:
        number = shard_number(obj["metadata"]["name"])
        assert number is not None
        table = shard_table(number, obj["data"])
        assert table is not None
        tables.append(table)
    return [route.model_dump(mode="json") for route in merged(tables).routes]


def shard_config(api: StandInKubeAPI) -> dict[str, Any]:
    """The ConfigMap of the shard every endpoint of these tests lives in."""
    config = api.get(CONFIG_MAP, SYSTEM_NAMESPACE, SHARD)
    assert config is not None
    return config


def rebuilt(api: StandInKubeAPI) -> list[dict[str, Any]]:
    """The route table a full rebuild makes from the stored route Ingresses."""
    ingresses = [obj for obj in api.objects() if obj["kind"] == INGRESS.kind]
    return [route.model_dump(mode="json") for route in route_table(ingresses).routes]


def route_lists(api: StandInKubeAPI) -> int:
    return sum(count for (_, selector), count in api.lists.items() if ROUTE_LIST in selector)


def weights(api: StandInKubeAPI) -> dict[str, int]:
    return {route["endpoint"]: route["canary_weight"] for route in served(api)}


def current(store: EndpointStore, name: str) -> EndpointRecord:
    record = store.get(name)
    assert record is not None
    return record


def canary(weight: int) -> dict[str, Any]:
    return {**SPEC, "canary": {"image": IMAGE, "weight": weight, "replicas": 1}}


def test_batches_of_creates_updates_and_deletes_keep_the_table_a_full_rebuild_would_make(
    api: StandInKubeAPI, store: EndpointStore, build: Callable[[], tuple[Reconciler, HookedCluster]]
) -> None:
    reconciler, _ = build()
    lists = route_lists(api)
    for name in [A, B, C, D]:
        store.create(name, canary(10) if name == B else SPEC, [EAST])
    reconciler.reconcile_many(list([A, B, C, D]), wait=0.0, concurrency=4)
    assert served(api) == rebuilt(api) and len(served(api)) == 4
    store.update_spec(B, canary(60), current(store, B).lifecycle_id or "")  # a canary weight change
    store.update_desired_state(C, "deleted", expected_lifecycle_id=current(store, C).lifecycle_id)
    d = current(store, D)
    moved = store.update_target_regions(
        D,
        [WEST],
        [EAST],
        expected_lifecycle_id=d.lifecycle_id or "",
        expected_updated_at=d.updated_at or "",
    )  # the Region is no longer a target: its objects go
    assert moved is not None
    store.create(E, canary(30), [EAST])
    reconciler.reconcile_many([B, C, D, E], wait=0.0, concurrency=4)
    assert weights(api) == {A: 0, B: 60, E: 30}
    assert served(api) == rebuilt(api)
    store.update_desired_state(A, "deleted", expected_lifecycle_id=current(store, A).lifecycle_id)
    reconciler.reconcile_many([A], wait=0.0)
    assert weights(api) == {B: 60, E: 30}
    assert served(api) == rebuilt(api)
    assert route_lists(api) == lists  # no batch listed the routes
    assert reconciler.ensure_system().applied == []  # the full rebuild finds nothing to change


def test_a_refresh_after_a_batch_reads_and_writes_only_the_shard_it_touches_and_lists_no_route(
    api: StandInKubeAPI, store: EndpointStore, build: Callable[[], tuple[Reconciler, HookedCluster]]
) -> None:
    reconciler, cluster = build()
    for name in (A, B):
        store.create(name, SPEC, [EAST])
    lists, reads, writes = sum(api.lists.values()), api.requests["GET"], api.writes()
    RouteKeeper(cluster).refresh(RouteChanges())  # nothing changed: nothing read or written
    assert (sum(api.lists.values()), api.requests["GET"] - reads, api.writes()) == (lists, 0, writes)
    reconciler.reconcile_many([A, B], wait=0.0)
    store.create(C, SPEC, [EAST])
    routes, reads, patches = route_lists(api), api.requests["GET"], api.requests["PATCH"]
    reconciler.reconcile_many([C], wait=0.0)
    assert route_lists(api) == routes
    # c's endpoint objects, then its one shard (known to this process: not read), nothing else
    shard_writes = api.requests["PATCH"] - patches - len(api.endpoint_objects()) // 3
    assert shard_writes == 1
    assert [route["endpoint"] for route in served(api)] == [A, B, C]


def test_a_known_configmap_another_writer_changed_is_refused_then_read_and_merged(
    api: StandInKubeAPI, store: EndpointStore, build: Callable[[], tuple[Reconciler, HookedCluster]]
) -> None:
    """The first environment applies over the version it last wrote; the second wrote since, so the
    apply is refused (409), and the first reads the ConfigMap and merges into it: no route lost."""
    first, first_cluster = build()
    second, _ = build()
    for name in (A, B, C):
        store.create(name, SPEC, [EAST])
    first.reconcile_many([A], wait=0.0)  # the first now knows the ConfigMap's version
    second.reconcile_many([B], wait=0.0)  # ... which this write makes stale
    lists, patches = route_lists(api), api.requests["PATCH"]
    api_gets: list[str] = []
    original_get = first_cluster.get

    def counted_get(kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        api_gets.append(f"{kind.kind}/{name}")
        return original_get(kind, namespace, name)

    first_cluster.get = counted_get  # type: ignore[method-assign]
    first.reconcile_many([C], wait=0.0)
    assert [route["endpoint"] for route in served(api)] == [A, B, C]
    assert served(api) == rebuilt(api)
    assert route_lists(api) == lists
    assert api_gets.count(f"ConfigMap/{SHARD}") == 1  # read only after the refusal
    assert api.requests["PATCH"] - patches >= 3  # c's objects, the refused apply, the merged one


def test_a_configmap_deleted_since_this_process_wrote_it_is_rebuilt_from_the_routes(
    api: StandInKubeAPI, store: EndpointStore, build: Callable[[], tuple[Reconciler, HookedCluster]]
) -> None:
    """An apply creates an object whatever resourceVersion it carries: a known table applied over a
    deleted ConfigMap would bring back whatever that table missed, so the table is rebuilt instead."""
    first, first_cluster = build()
    second, _ = build()
    for name in (A, B, C):
        store.create(name, SPEC, [EAST])
    first.reconcile_many([A], wait=0.0)
    second.reconcile_many([B], wait=0.0)  # the first's known table lacks b
    first_cluster.delete([ObjectRef.of(shard_config(api))])
    lists = route_lists(api)
    first.reconcile_many([C], wait=0.0)
    assert route_lists(api) == lists + 1
    assert [route["endpoint"] for route in served(api)] == [A, B, C]
    assert served(api) == rebuilt(api)


def test_a_refresh_that_lost_the_race_reads_again_and_loses_no_route(
    api: StandInKubeAPI, store: EndpointStore, build: Callable[[], tuple[Reconciler, HookedCluster]]
) -> None:
    """Two execution environments: the second's refresh writes the ConfigMap between the first's
    read and its apply, so the first's stale resourceVersion is refused (409) and it merges again."""
    first, first_cluster = build()
    second, _ = build()
    for name in (A, B):
        store.create(name, SPEC, [EAST])
    between: list[list[dict[str, Any]]] = []

    def second_refreshes() -> None:
        second.reconcile_many([B], wait=0.0)
        between.append(served(api))

    first_cluster.before_conditional_apply = second_refreshes
    lists = route_lists(api)
    first.reconcile_many([A], wait=0.0)
    assert [[route["endpoint"] for route in table] for table in between] == [[B]]
    assert [route["endpoint"] for route in served(api)] == [A, B]
    assert served(api) == rebuilt(api)
    assert route_lists(api) == lists  # settled by merging again, not by listing


def test_conflicts_past_the_bound_rebuild_from_the_listed_routes(
    api: StandInKubeAPI, store: EndpointStore, build: Callable[[], tuple[Reconciler, HookedCluster]]
) -> None:
    reconciler, cluster = build()
    store.create(A, SPEC, [EAST])
    reconciler.reconcile_many([A], wait=0.0)
    store.create(B, SPEC, [EAST])
    reconciler.reconcile_many([B], wait=0.0)
    changes = RouteChanges()
    changes.put(A, None)  # says a's route is gone, while its Ingress is still there
    api.inject(Fault(status=409, method="PATCH", times=MERGE_ATTEMPTS))
    lists = route_lists(api)
    RouteKeeper(cluster).refresh(changes)
    assert route_lists(api) == lists + 1
    assert [route["endpoint"] for route in served(api)] == [A, B]  # what the routes say
    assert served(api) == rebuilt(api)


def test_a_conflict_is_merged_again_without_a_list(
    api: StandInKubeAPI, store: EndpointStore, build: Callable[[], tuple[Reconciler, HookedCluster]]
) -> None:
    reconciler, _ = build()
    store.create(A, SPEC, [EAST])
    lists = route_lists(api)
    reconciler.reconcile_many([A], wait=0.0)  # applies the endpoint's objects: the fault waits
    store.create(B, SPEC, [EAST])
    reconciler.reconcile_many([B], wait=0.0)
    assert route_lists(api) == lists
    patches = api.requests["PATCH"]
    api.inject(Fault(status=409, method="PATCH"))
    changes = RouteChanges()
    changes.put(A, None)
    RouteKeeper(reconciler.cluster).refresh(changes)
    assert api.requests["PATCH"] - patches == 2  # refused once, then applied: no rollout of the proxy
    assert route_lists(api) == lists
    assert [route["endpoint"] for route in served(api)] == [B]


@pytest.mark.parametrize("damage", ["deleted", "not-json", "not-a-table"])
def test_a_missing_or_unreadable_configmap_is_rebuilt_from_the_listed_routes(
    api: StandInKubeAPI,
    store: EndpointStore,
    build: Callable[[], tuple[Reconciler, HookedCluster]],
    damage: str,
) -> None:
    reconciler, cluster = build()
    store.create(A, SPEC, [EAST])
    reconciler.reconcile_many([A], wait=0.0)
    config = shard_config(api)
    if damage == "deleted":
        cluster.delete([ObjectRef.of(config)])
    else:
        text = "{" if damage == "not-json" else json.dumps({"routes": [{"path": "/inference/a"}]})
        number = shard_of(A)
        api.apply_as("kubectl", {**config, "data": {shard_key(number, TABLE_JSON): text}})
    store.create(B, SPEC, [EAST])
    lists = route_lists(api)
    reconciler.reconcile_many([B], wait=0.0)
    assert route_lists(api) == lists + 1
    assert [route["endpoint"] for route in served(api)] == [A, B]
    assert served(api) == rebuilt(api)


def test_a_batch_during_a_refresh_is_merged_by_the_running_refresh(
    api: StandInKubeAPI, store: EndpointStore, build: Callable[[], tuple[Reconciler, HookedCluster]]
) -> None:
    """A batch of the same execution environment whose refresh finds one running leaves its
    changes to it: the running refresh merges them before it lets go, with no list."""
    reconciler, cluster = build()
    for name in (A, B):
        store.create(name, SPEC, [EAST])
    returned: list[list[dict[str, Any]]] = []

    def batch_meanwhile() -> None:
        reconciler.reconcile_many([B], wait=0.0)
        returned.append(served(api))

    cluster.before_conditional_apply = batch_meanwhile
    lists = route_lists(api)
    reconciler.reconcile_many([A], wait=0.0)
    assert returned == [[]]  # the inner batch returned before any refresh wrote its route
    assert [route["endpoint"] for route in served(api)] == [A, B]
    assert route_lists(api) == lists


def test_changes_of_a_failed_refresh_are_kept_for_the_next_batch(
    api: StandInKubeAPI, store: EndpointStore, build: Callable[[], tuple[Reconciler, HookedCluster]]
) -> None:
    reconciler, cluster = build()
    store.create(A, SPEC, [EAST])

    def unavailable() -> None:
        raise ClusterUnavailableError("apply ConfigMap: injected")

    cluster.before_conditional_apply = unavailable  # the shard's write fails
    with pytest.raises(ClusterUnavailableError):
        reconciler.reconcile_many([A], wait=0.0)  # the endpoint is applied, its refresh fails
    assert served(api) == []
    store.create(B, SPEC, [EAST])
    store.create(C, SPEC, [EAST])
    reconciler.reconcile_many([B], wait=0.0)
    assert [route["endpoint"] for route in served(api)] == [A, B]
    reconciler.reconcile_many([A], wait=0.0)  # nothing left to apply, nor to refresh
    assert [route["endpoint"] for route in served(api)] == [A, B]
    lists = route_lists(api)
    reconciler.reconcile_many([C], wait=0.0)
    assert served(api) == rebuilt(api) and route_lists(api) == lists


class GatedCluster(HookedCluster):
    """The real adapter; an apply of `held`'s Deployment waits until `release` is set, and every
    conditional ConfigMap apply (one per route refresh) is counted."""

    def __init__(self, api: StandInKubeAPI, held: str) -> None:
        super().__init__(api)
        self.held, self.entered, self.release = held, threading.Event(), threading.Event()
        self.refreshes = 0

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == self.held:
            self.entered.set()
            assert self.release.wait(30)
        if obj["kind"] == CONFIG_MAP.kind and obj["metadata"].get("resourceVersion"):
            self.refreshes += 1
        return super().apply(obj)


def gated(
    api: StandInKubeAPI, store: EndpointStore, clock: Callable[[], float]
) -> tuple[Reconciler, GatedCluster]:
    cluster = GatedCluster(api, held=B)
    reconciler = Reconciler(store, cluster, EAST, wait=0.0, clock=clock)
    reconciler.ensure_system()
    for name in (A, B):
        store.create(name, SPEC, [EAST])
    return reconciler, cluster


def test_concurrent_batches_share_one_refresh_made_by_the_last_to_end(
    api: StandInKubeAPI, store: EndpointStore
) -> None:
    """A batch that ends while another of its execution environment runs leaves its route to the
    last one: one refresh writes both routes, and no change is left waiting."""
    reconciler, cluster = gated(api, store, clock=lambda: 0.0)
    running = threading.Thread(target=reconciler.reconcile_many, args=([B],), kwargs={"wait": 0.0})
    running.start()
    assert cluster.entered.wait(30)
    reconciler.reconcile_many([A], wait=0.0)
    assert served(api) == [] and cluster.refreshes == 0  # left to the batch still running
    cluster.release.set()
    running.join(timeout=30)
    assert [route["endpoint"] for route in served(api)] == [A, B]
    assert cluster.refreshes == 1
    assert served(api) == rebuilt(api)
    cluster.close()


def test_a_change_that_waited_the_longest_delay_is_refreshed_by_its_own_batch(
    api: StandInKubeAPI, store: EndpointStore
) -> None:
    """Batches that keep overlapping never starve the table: a change recorded
    ROUTE_REFRESH_MAX_DELAY ago is refreshed by the batch that ends, another still running."""
    now = [0.0]
    reconciler, cluster = gated(api, store, clock=lambda: now[0])
    running = threading.Thread(target=reconciler.reconcile_many, args=([B],), kwargs={"wait": 0.0})
    running.start()
    assert cluster.entered.wait(30)
    reconciler.reconcile_many([A], wait=0.0)
    assert served(api) == []  # a's route waits for b's batch
    now[0] = ROUTE_REFRESH_MAX_DELAY
    reconciler.reconcile_many([A], wait=0.0)  # nothing to apply; the waiting change is old enough
    assert [route["endpoint"] for route in served(api)] == [A] and cluster.refreshes == 1
    cluster.release.set()
    running.join(timeout=30)
    assert [route["endpoint"] for route in served(api)] == [A, B] and cluster.refreshes == 2
    cluster.close()


def test_a_rebuild_never_overwrites_a_shard_written_after_it_read_the_shards(
    api: StandInKubeAPI, store: EndpointStore, build: Callable[[], tuple[Reconciler, HookedCluster]]
) -> None:
    """The sweep's rebuild reads the shards, then lists the routes. Another environment that applies
    a route and writes its shard right after that list makes the rebuild's write fail (409): the
    rebuild reads and lists again, so the new route is kept, never removed by a list that predates
    it. (Listing first and writing unconditionally, as before, lost B here.)"""
    sweeper, sweeper_cluster = build()
    other, _ = build()
    store.create(A, SPEC, [EAST])
    store.create(B, SPEC, [EAST])
    sweeper.reconcile_many([A], wait=0.0)
    stale = RouteChanges()
    stale.put(A, None)  # the shard, as a stale writer would leave it: A's route missing
    keeper = RouteKeeper(sweeper_cluster)
    keeper.refresh(stale)  # A's route gone from the shard, its Ingress still there: drift
    assert served(api) == []

    listed_routes = sweeper_cluster.list_in

    def list_then_other_writes_b(
        kind: Kind, namespace: str, labels: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        found = listed_routes(kind, namespace, labels)
        if kind == INGRESS and not other_wrote:
            other_wrote.append(True)
            other.reconcile_many([B], wait=0.0)  # applies B's Ingress, then writes the shard
        return found

    other_wrote: list[bool] = []
    sweeper_cluster.list_in = list_then_other_writes_b  # type: ignore[method-assign]
    sweeper.ensure_system()  # heals A; B's route lands right after the rebuild listed the routes
    assert [route["endpoint"] for route in served(api)] == [A, B]
    assert served(api) == rebuilt(api)
