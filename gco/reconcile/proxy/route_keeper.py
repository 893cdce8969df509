"""The route keeper: a Region's route shards kept equal to its route Ingresses, its own reconciler.

The endpoint reconciler applies and deletes each endpoint's route Ingress (`route-<name>` in
`gco-system`) and hands what that did to the routes over as values (`RouteChanges`); the keeper
stores them where the proxy reads them (`RouteStore`, sharded ConfigMaps), has the proxy's pods
load what it wrote (`ProxyProbe.refresh`), and answers whether the proxy serves a route yet
(`unserved`, `unserved_all`).

Contract:

- `rebuild` (on start and in every sweep) makes every shard equal to the route Ingresses listed
  now, and heals any drift (a route edited by hand, a change a failed write lost).
- `end_batch`, `refresh` and `publish` merge changes into the shards they touch. A change is never
  lost: one a write could not store stays recorded, ahead of later ones, for the next refresh; one
  not known exactly (`RouteChanges.rebuild`) rebuilds every shard; a write carries the version it
  merged into, so a concurrent writer's change is merged, not overwritten.
- Safe to call from any thread. Changes recorded while another thread refreshes are written by that
  thread before it lets go, so `end_batch` and `refresh` may return before their changes are stored;
  `publish`, whose caller asks the proxy next, waits for that thread to let go (bounded). The next
  sweep's rebuild bounds how long any drift can last.

`docs/proxy.md` ("The route keeper's threads") explains how the lock, the pending changes and the
pool that writes shards fit together, and draws one batch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gco.reconcile.batches import each_leaf
from gco.reconcile.errors import ClusterConflictError, ClusterError
from gco.reconcile.objects import (
    INGRESS,
    MANAGED_BY,
    MANAGER,
    ROLE_LABEL,
    ROUTE_ROLE,
    SYSTEM_NAMESPACE,
    ObjectRef,
    content_hash,
    labels_of,
    route_name,
)
from gco.reconcile.port import Cluster
from gco.reconcile.proxy.proxy_probe import ProxyProbe
from gco.reconcile.proxy.route_changes import PendingRouteChanges, RouteChanges
from gco.reconcile.proxy.route_shards import (
    SHARDS,
    ShardVersion,
    route_digest,
    shard_data,
    shard_name,
    shard_of,
    shard_version,
    split,
)
from gco.reconcile.proxy.route_store import ConfigMapRouteStore, RouteStore, StoredShard
from gco.reconcile.proxy.routes import Route, route_of, route_table

log = logging.getLogger(__name__)
# The longest a route change waits for the last of several concurrent batches to end before a batch
# that ends refreshes the shards anyway (`PendingRouteChanges.end_batch`).
ROUTE_REFRESH_MAX_DELAY = 1.0
# Reads and merges of a shard one refresh makes while concurrent writers keep changing it, before it
# rebuilds the shard from the route objects instead.
MERGE_ATTEMPTS = 3
MAX_SHARD_WRITES = 8  # shard merges of one refresh in flight at once
# The longest `publish` waits for a refresh running on another thread to let go: that refresh stores
# the changes `publish` recorded, and the caller asks the proxy about them next.
PUBLISH_WAIT_S = 10.0


@dataclass(frozen=True)
class Published:
    """What `RouteKeeper.publish` did: the ready proxy pods it told to load the shards it wrote
    (None: it wrote none, or could not tell them; the pods are then listed when asked)."""

    pods: tuple[str, ...] | None = None


@dataclass
class RouteReport:
    """What one pass wrote (shard names), and how many routes the Region has after a rebuild."""

    applied: list[str] = field(default_factory=list)
    routes: int | None = None


class RouteKeeper:
    """Keeps one Region's route shards (module docstring).

    Parameters:
        cluster: the Region's cluster (route Ingresses are listed through it).
        store: where the shards live (default: ConfigMaps through `cluster`).
        probe: asks the proxy whether it serves a route; None: the routes are taken as served once
            stored (a cluster with no proxy to ask, such as a unit test's).
        clock: monotonic seconds (injected in tests).
    """

    def __init__(
        self,
        cluster: Cluster,
        store: RouteStore | None = None,
        probe: ProxyProbe | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.store = store or ConfigMapRouteStore(cluster)
        self.probe = probe
        self._pending = PendingRouteChanges(max_delay=ROUTE_REFRESH_MAX_DELAY, clock=clock)
        self._lock = threading.Lock()
        self._known: dict[int, StoredShard] = {}  # shards as this process last wrote them

    # -- batches -------------------------------------------------------------------------------

    def begin_batch(self) -> None:
        """A batch of this process starts (its changes come with `end_batch`)."""
        self._pending.begin_batch()

    def end_batch(self, changes: RouteChanges) -> None:
        """A batch ended with these changes: store them now if it is the last batch running, or the
        oldest change waiting is `ROUTE_REFRESH_MAX_DELAY` old; else the last batch to end does.

        Raises:
            ClusterError: a shard could not be read or written (the changes stay recorded).
        """
        if self._pending.end_batch(changes):
            self._drain()

    def refresh(self, changes: RouteChanges | None = None) -> None:
        """Store route changes now (None: not known, so rebuild every shard), or leave them to a
        refresh running on another thread, which stores them before it lets go.

        Raises:
            ClusterError: a shard could not be read or written (the changes stay recorded).
        """
        self._pending.record(RouteChanges(rebuild=True) if changes is None else changes)
        self._drain()

    def rebuild(self) -> RouteReport:
        """Write every shard whose routes differ from the route Ingresses, listed now.

        Every change recorded before is in the list, so those are dropped rather than merged again
        (they are put back if the rebuild fails).

        Raises:
            ClusterError: the routes could not be listed, or a shard read or written.
        """
        with self._lock:
            taken = self._pending.take()
            try:
                report = self._rebuild_locked(range(SHARDS))
            except Exception:
                self._pending.restore(taken)
                raise
            self._refresh_pending_locked(report)
        self._drain()
        return report

    def publish(self, changes: RouteChanges) -> Published:
        """Merge `changes` into their shards now, then have the proxy's pods load what was written.

        For a batch that asks the proxy next (`Reconciler`): the pods told are returned, so that
        asking them (`unserved_all`) needs no second list of them. Empty `changes` still store what
        other batches left pending (their routes may be the ones asked about). When a refresh is
        running on another thread, `publish` waits for it to let go (up to `PUBLISH_WAIT_S`): it
        merges the recorded changes and tells the pods before it does, and asking the proxy before
        that would only find the routes not served yet (a status write and another reconcile each).
        After the wait it reports no pods told (they are listed when asked).

        Raises:
            ClusterError: a shard could not be read or written (the changes stay recorded).
        """
        self._pending.record(changes)
        if not self._lock.acquire(timeout=PUBLISH_WAIT_S):
            return Published()
        try:
            report = RouteReport()
            self._refresh_pending_locked(report, nudge=False)
            told = self._nudge(self.probe) if report.applied and self.probe is not None else None
        finally:
            self._lock.release()
        self._drain()
        return Published(None if told is None else tuple(told))

    def unserved(self, route: Route) -> str | None:
        """None once a request through every ready proxy pod would take `route`; else why not."""
        if self.probe is None:
            return None
        return self.probe.unserved(route.endpoint, route_digest(route))

    def unserved_all(
        self, routes: Sequence[Route], pods: Sequence[str] | None = None
    ) -> dict[str, str | None]:
        """`unserved` of each route, keyed by endpoint, from one list of the proxy's pods (none when
        `pods` are given: `Published.pods`). Each route held by a shard as this process last wrote
        or read it comes with that shard's version, so a pod that loaded it needs no question about
        the route (`proxy_probe.py`)."""
        if self.probe is None or not routes:
            return {route.endpoint: None for route in routes}
        digests = {route.endpoint: route_digest(route) for route in routes}
        return self.probe.unserved_all(digests, pods, self.versions_holding(routes))

    def versions_holding(self, routes: Iterable[Route]) -> dict[str, ShardVersion]:
        """For each route a shard holds as this process last wrote or read it, that shard's version."""
        known = dict(self._known)  # one copy (refreshes on other threads replace entries)
        versions: dict[int, ShardVersion] = {}
        holding: dict[str, ShardVersion] = {}
        for route in routes:
            shard = shard_of(route.endpoint)
            stored = known.get(shard)
            if stored is None or stored.table is None or route not in stored.table.routes:
                continue
            if shard not in versions:
                versions[shard] = ShardVersion(shard, shard_version(stored.table))
            holding[route.endpoint] = versions[shard]
        return holding

    # -- refreshing ----------------------------------------------------------------------------

    def _drain(self) -> None:
        while self._pending.stale:
            if not self._lock.acquire(blocking=False):
                return  # the holder refreshes again: it sees the mark before or after letting go
            try:
                self._refresh_pending_locked(RouteReport())
            finally:
                self._lock.release()

    def _refresh_pending_locked(self, report: RouteReport, *, nudge: bool = True) -> None:
        while self._pending.stale:
            changes = self._pending.take()
            try:
                self._apply_locked(changes, report)
            except Exception:
                self._pending.restore(changes)
                raise
        if report.applied:
            log.info("route shards written: %s", ", ".join(report.applied))
            if self.probe is not None and nudge:
                self._nudge(self.probe)

    @staticmethod
    def _nudge(probe: ProxyProbe) -> list[str] | None:
        """Have the proxy's kubelets load the written shards now (`proxy_probe.py`). Only a speed-up:
        the shards are stored, and each kubelet's periodic sync loads them anyway, so a failure is
        logged, never raised (`unserved` asks again for any pod still behind)."""
        try:
            return probe.refresh()
        except ClusterError as error:
            log.warning("could not have the proxy's pods load the route shards now: %s", error)
            return None

    def _apply_locked(self, changes: RouteChanges, report: RouteReport) -> None:
        if changes.rebuild:
            self._rebuild_locked(range(SHARDS), report)
            return
        by_shard: dict[int, RouteChanges] = {}
        for endpoint, route in changes.routes.items():
            by_shard.setdefault(shard_of(endpoint), RouteChanges()).put(endpoint, route)
        merged = self._merge_all(by_shard, report)
        failed = [shard for shard, done in zip(by_shard, merged, strict=True) if not done]
        if failed:
            self._rebuild_locked(failed, report)

    def _merge_all(self, by_shard: dict[int, RouteChanges], report: RouteReport) -> list[bool]:
        """Each touched shard merged, concurrently (shards are independent objects): a batch's
        refresh takes one round trip, not one per shard. The first error is raised."""
        merges = list(by_shard.items())
        return each_leaf(lambda item: self._merge_locked(item[0], item[1], report), merges, MAX_SHARD_WRITES)

    def _merge_locked(self, shard: int, changes: RouteChanges, report: RouteReport) -> bool:
        """Merge `changes` into the stored shard; False when it must be rebuilt instead."""
        for attempt in range(MERGE_ATTEMPTS):
            base = self._known.pop(shard, None) if attempt == 0 else None
            base = base or self.store.read(shard)
            merged = changes.merged_into(base.table) if base is not None and base.table is not None else None
            if base is None or merged is None:
                return False
            if content_hash(shard_data(shard, merged)) == base.digest:
                self._known[shard] = base
                return True
            try:
                written = self.store.write(shard, merged, version=base.version)
            except ClusterConflictError:
                continue  # another writer wrote it since the read: merge into what it wrote
            report.applied.append(shard_name(shard))
            if written.uid != base.uid:
                # Created, not updated: the shard was deleted since it was read, and an apply creates
                # whatever resourceVersion it carries, so what it held is rebuilt from the routes.
                return False
            self._known[shard] = written
            return True
        return False

    def _rebuild_locked(self, shards: Iterable[int], report: RouteReport | None = None) -> RouteReport:
        """Write each of `shards` whose routes differ from the listed route Ingresses.

        The shards are read before the routes are listed, and each is written over the version
        read: a route keeper applies a route's Ingress before it writes the route's shard, so a
        shard written after the read fails the write (409) instead of being overwritten with a list
        that may predate its route, and one written before the read has its route in the list. A
        shard that lost that race is read and rebuilt again.

        Raises:
            ClusterConflictError: shards kept changing under `MERGE_ATTEMPTS` rebuilds (the changes
                stay recorded for the next refresh; the sweep rebuilds again).
        """
        report = report or RouteReport()
        labels = {MANAGED_BY: MANAGER, ROLE_LABEL: ROUTE_ROLE}
        pending = list(shards)
        for _ in range(MERGE_ATTEMPTS):
            stored = self.store.read_all()
            table = route_table(route_objects(self.cluster.list_in(INGRESS, SYSTEM_NAMESPACE, labels)))
            report.routes = len(table.routes)
            wanted = split(table)
            conflicted = []
            for shard in pending:
                current = stored.get(shard)
                if current is not None and current.digest == content_hash(shard_data(shard, wanted[shard])):
                    self._known[shard] = current
                    continue
                self._known.pop(shard, None)
                version = current.version if current is not None else None
                try:
                    self._known[shard] = self.store.write(shard, wanted[shard], version=version)
                except ClusterConflictError:
                    conflicted.append(shard)
                    continue
                report.applied.append(shard_name(shard))
            if not conflicted:
                return report
            pending = conflicted
        raise ClusterConflictError(f"route shards {pending} kept changing while they were rebuilt", 409)


def route_objects(observed: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The route Ingresses among observed managed objects."""
    return [obj for obj in observed if labels_of(obj).get(ROLE_LABEL) == ROUTE_ROLE]


# -- what a pass did to the Region's routes (`RouteChanges`) ------------------------------------


def is_route_key(kind: str, namespace: str) -> bool:
    """An Ingress in the system namespace: a route (Ingresses elsewhere are never routes)."""
    return kind == INGRESS.kind and namespace == SYSTEM_NAMESPACE


def note_deleted(changes: RouteChanges, name: str, deleted: Sequence[ObjectRef]) -> None:
    """The endpoint's route Ingress deleted: it has no route. Any other Ingress there is none gco
    renders (made by hand): what its deletion did to the routes only a rebuild knows."""
    for ref in deleted:
        if is_route_key(ref.kind, ref.namespace):
            if ref.name == route_name(name):
                changes.put(name, None)
            else:
                changes.rebuild = True


def note_applied(
    changes: RouteChanges,
    name: str,
    applied: Sequence[dict[str, Any]],
    results: Sequence[dict[str, Any] | Exception],
) -> None:
    """Each applied route's answer is the endpoint's route now; a failed apply's effect is unknown."""
    for obj, result in zip(applied, results, strict=True):
        ref = ObjectRef.of(obj)
        if not is_route_key(ref.kind, ref.namespace):
            continue
        if isinstance(result, dict) and ref.name == route_name(name):
            # The answer is the stored object; its kind as applied, should an answer leave it out.
            stored = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], **result}
            changes.put(name, route_of(stored) if _listed_as_route(stored) else None)
        else:
            changes.rebuild = True


def _listed_as_route(obj: dict[str, Any]) -> bool:
    """Whether the route list (gco's label selector for routes) would list the object."""
    labels = labels_of(obj)
    return labels.get(MANAGED_BY) == MANAGER and labels.get(ROLE_LABEL) == ROUTE_ROLE
