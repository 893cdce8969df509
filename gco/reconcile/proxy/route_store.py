"""Where a Region's routes are stored for its proxy: a small port, and its adapter on ConfigMaps.

`RouteStore` reads and writes route shards (`route_shards.py`); the route keeper (`route_keeper.py`)
is its only user. `ConfigMapRouteStore` keeps each shard in its ConfigMap in `gco-system` through
the cluster port; a write carries the resourceVersion it merged into as an optimistic-concurrency
precondition, so two writers never lose each other's routes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from gco.reconcile.objects import (
    CONFIG_MAP,
    HASH_ANNOTATION,
    SYSTEM_NAMESPACE,
    ObjectRef,
    annotations_of,
)
from gco.reconcile.port import Cluster
from gco.reconcile.proxy.route_shards import (
    shard_config_map,
    shard_labels,
    shard_name,
    shard_number,
    shard_table,
)
from gco.reconcile.proxy.routes import RouteTable


@dataclass(frozen=True)
class StoredShard:
    """A shard as stored: its routes, resourceVersion, uid and data digest (None: not trusted)."""

    shard: int
    table: RouteTable | None
    version: str
    uid: str
    digest: str


class RouteStore(Protocol):
    """The route shards of one Region."""

    def read(self, shard: int) -> StoredShard | None:
        """The shard as stored (None: it does not exist)."""
        ...

    def read_all(self) -> dict[int, StoredShard]:
        """Every stored shard, by number (one list)."""
        ...

    def write(self, shard: int, table: RouteTable, *, version: str | None) -> StoredShard:
        """Store the shard's routes; with `version`, only over that resourceVersion.

        Raises:
            ClusterConflictError: the stored shard's version is not `version` (another writer).
        """
        ...


class ConfigMapRouteStore:
    """`RouteStore` on ConfigMaps `inference-proxy-routes-NN` in `gco-system`, through the cluster port."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def read(self, shard: int) -> StoredShard | None:
        stored = self.cluster.get(CONFIG_MAP, SYSTEM_NAMESPACE, shard_name(shard))
        return None if stored is None else _stored(shard, stored)

    def read_all(self) -> dict[int, StoredShard]:
        found: dict[int, StoredShard] = {}
        for obj in self.cluster.list_in(CONFIG_MAP, SYSTEM_NAMESPACE, shard_labels()):
            shard = shard_number(ObjectRef.of(obj).name)
            if shard is not None:
                found[shard] = _stored(shard, obj)
        return found

    def write(self, shard: int, table: RouteTable, *, version: str | None) -> StoredShard:
        obj = shard_config_map(shard, table)
        if version is not None:
            # metadata.resourceVersion in an applied object is a precondition: "if it doesn't
            # match, the update fails with a StatusConflict (HTTP status code 409)" and the client
            # should "GET the resource again, apply the changes afresh, and try submitting again"
            # (Kubernetes API Conventions, "Concurrency Control and Consistency",
            # https://github.com/kubernetes/community/blob/master/contributors/devel/sig-architecture/api-conventions.md#concurrency-control-and-consistency).
            obj["metadata"]["resourceVersion"] = version
        answer = self.cluster.apply(obj)
        meta = answer.get("metadata") or {}
        digest = annotations_of(obj).get(HASH_ANNOTATION, "")
        return StoredShard(
            shard, table, str(meta.get("resourceVersion") or ""), str(meta.get("uid") or ""), digest
        )


def _stored(shard: int, obj: dict[str, Any]) -> StoredShard:
    meta = obj.get("metadata") or {}
    return StoredShard(
        shard,
        shard_table(shard, obj.get("data")),
        str(meta.get("resourceVersion") or ""),
        str(meta.get("uid") or ""),
        annotations_of(obj).get(HASH_ANNOTATION, ""),
    )
