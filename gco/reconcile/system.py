"""The Region's shared objects: gco's namespaces and the inference proxy, kept as desired.

`ensure_system` is level-triggered like the endpoint reconciler: it reads each object, compares
the content digest gco sealed it with, and applies (server-side, gco's field manager) only what
is missing or different; so a Region already as desired costs reads and no write. The reconciler
runs it on start (its first reconcile in an execution environment) and on every sweep, where it
rebuilds the route table from every listed route Ingress: that heals any drift (a route edited by
hand, a change a failed refresh lost).

After a batch that changed routes the reconciler runs `refresh_route_table` instead: it merges the
batch's own changes into the table the proxy's ConfigMap holds, so its cost follows the batch
rather than the Region's size (the route table is rendered into the proxy's configuration).

Nothing here is ever deleted with an endpoint: the proxy objects carry no endpoint label, and the
endpoint planner only ever deletes objects labelled with the endpoint's name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gco.reconcile.access import Grant
from gco.reconcile.errors import ClusterConflictError
from gco.reconcile.objects import (
    CONFIG_MAP,
    DEPLOYMENT,
    HASH_ANNOTATION,
    INGRESS,
    MANAGED_BY,
    MANAGER,
    NAMESPACE,
    ROLE_LABEL,
    SYSTEM_NAMESPACE,
    ObjectRef,
    annotations_of,
    content_hash,
    kind_of,
)
from gco.reconcile.port import Cluster
from gco.reconcile.render import ROUTE_ROLE
from gco.reconcile.render_proxy import PROXY_CONFIG, PROXY_DEPLOYMENT, ROUTES_JSON, render_proxy
from gco.reconcile.route_changes import RouteChanges
from gco.reconcile.routes import RouteTable, route_table, table_from_json
from gco.reconcile.settings import RenderSettings

# The proxy's objects rendered from the route table: its configuration, and the Deployment whose pod
# template carries the configuration's digest.
ROUTE_DEPENDENT = frozenset({(CONFIG_MAP, PROXY_CONFIG), (DEPLOYMENT, PROXY_DEPLOYMENT)})
# Reads and merges of the ConfigMap one refresh makes when concurrent refreshes keep changing it,
# before it rebuilds the table from the route objects instead.
MERGE_ATTEMPTS = 3


@dataclass(frozen=True)
class KnownRouteConfig:
    """The proxy's ConfigMap as this process last wrote it: its resourceVersion, table and digest.

    The next refresh merges into this table and applies over this version without reading the
    ConfigMap first; if another writer changed it since, the precondition fails (409) and that
    refresh reads it, as it would have without this.
    """

    version: str
    table: RouteTable
    digest: str
    uid: str


@dataclass
class SystemReport:
    """What one pass applied (object keys), and the route table the proxy now serves.

    `config`: the ConfigMap this pass wrote, when it knows its resourceVersion (a route refresh).
    """

    applied: list[str] = field(default_factory=list)
    routes: RouteTable = field(default_factory=RouteTable)
    config: KnownRouteConfig | None = None


def namespace_objects(namespaces: Sequence[str]) -> list[dict[str, Any]]:
    """gco's namespaces, each sealed with its content digest."""
    objects = []
    for name in namespaces:
        obj: dict[str, Any] = {
            "apiVersion": NAMESPACE.api_version,
            "kind": NAMESPACE.kind,
            "metadata": {"name": name, "labels": {MANAGED_BY: MANAGER}, "annotations": {}},
        }
        obj["metadata"]["annotations"][HASH_ANNOTATION] = content_hash(obj)
        objects.append(obj)
    return objects


def route_objects(observed: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The route Ingresses among observed managed objects."""
    return [
        obj for obj in observed if (obj.get("metadata") or {}).get("labels", {}).get(ROLE_LABEL) == ROUTE_ROLE
    ]


def ensure_system(
    cluster: Cluster,
    settings: RenderSettings,
    grant: Grant,
    observed: Iterable[Mapping[str, Any]] | None = None,
    *,
    full: bool = True,
) -> SystemReport:
    """Apply gco's namespaces and the proxy where they differ from what is rendered.

    The route table is rebuilt from every route Ingress (listed, or in `observed`), whatever the
    proxy's ConfigMap held: this is what heals a table that drifted from the routes.

    Parameters:
        observed: managed objects already listed (the sweep's snapshot); None lists the routes afresh
            (the route Ingresses, which the renderer puts in the system namespace only: one list).
        full: check every object (on start and in the sweep). A route refresh that falls back to
            the listed routes (False) checks only what the route table is rendered into, the proxy's
            ConfigMap and Deployment (its configuration digest): the namespaces, the proxy's Service
            and its autoscaler do not depend on the routes and were ensured before any endpoint was
            applied.
    """
    report = SystemReport()
    for obj in namespace_objects(grant.namespaces) if full else ():
        _apply_if_changed(cluster, obj, report)
    route_labels = {MANAGED_BY: MANAGER, ROLE_LABEL: ROUTE_ROLE}
    listed = cluster.list_in(INGRESS, SYSTEM_NAMESPACE, route_labels) if observed is None else observed
    report.routes = route_table(route_objects(listed))
    for obj in render_proxy(settings.proxy, report.routes):
        if full or (kind_of(obj), ObjectRef.of(obj).name) in ROUTE_DEPENDENT:
            _apply_if_changed(cluster, obj, report)
    return report


def refresh_route_table(
    cluster: Cluster,
    settings: RenderSettings,
    grant: Grant,
    changes: RouteChanges,
    *,
    known: KnownRouteConfig | None = None,
    attempts: int = MERGE_ATTEMPTS,
) -> SystemReport:
    """Bring the proxy's route table up to date with `changes`, without listing the routes.

    Reads the proxy's ConfigMap (one GET; none when `known` is what this process last wrote),
    merges the changes into the table its `routes.json` holds, and applies the ConfigMap rendered
    from the merged table with the read resourceVersion as a precondition, then the Deployment's
    configuration digest (as `ensure_system`). A concurrent refresh (another execution
    environment's) that wrote the ConfigMap in between makes the apply fail with 409 Conflict: the
    ConfigMap is read and merged again, so neither refresh's routes are lost. After `attempts`
    conflicts, or when the merge cannot be trusted (no ConfigMap, a `routes.json` that is not a
    route table, a change not known exactly, two routes of one path), the table is rebuilt from
    the listed route Ingresses instead (`ensure_system`, full=False).
    """
    for attempt in range(attempts if not changes.rebuild else 0):
        base = known if attempt == 0 and known is not None else _read_route_config(cluster)
        merged = changes.merged_into(base.table) if base is not None else None
        if base is None or merged is None:
            break
        report = SystemReport(routes=merged, config=base)
        config, deployment = _route_dependents(render_proxy(settings.proxy, merged))
        digest = annotations_of(config).get(HASH_ANNOTATION, "")
        if base.digest == digest:
            _apply_if_changed(cluster, deployment, report)
            return report
        # metadata.resourceVersion in the applied object is an optimistic-concurrency
        # precondition: "When a record is about to be updated, its version is checked against
        # a pre-saved value, and if it doesn't match, the update fails with a StatusConflict
        # (HTTP status code 409)" and "the correct client action at this point is to GET the
        # resource again, apply the changes afresh, and try submitting again" (Kubernetes API
        # Conventions, "Concurrency Control and Consistency",
        # https://github.com/kubernetes/community/blob/master/contributors/devel/sig-architecture/api-conventions.md#concurrency-control-and-consistency).
        # An apply is served by the same update path (apiserver registry `Store.Update`), which
        # answers "the object has been modified; please apply your changes to the latest
        # version and try again" when the applied version differs from the stored one.
        precondition = {**config, "metadata": {**config["metadata"], "resourceVersion": base.version}}
        try:
            answer = cluster.apply(precondition)
        except ClusterConflictError:
            continue  # another refresh wrote it since the read: merge into what it wrote
        report.applied.append(str(ObjectRef.of(config)))
        meta = answer.get("metadata") or {}
        if str(meta.get("uid") or "") != base.uid:
            # Created, not updated: the ConfigMap was deleted since this process wrote it, and an
            # apply creates whatever resourceVersion it carries, so the table it held (which other
            # writers may have changed before the deletion) is rebuilt from the routes instead.
            return ensure_system(cluster, settings, grant, None, full=False)
        version = str(meta.get("resourceVersion") or "")
        report.config = KnownRouteConfig(version, merged, digest, base.uid) if version else None
        # The configuration changed, so the Deployment's digest did: applied without reading it
        # first (an apply of what is already stored changes nothing).
        cluster.apply(deployment)
        report.applied.append(str(ObjectRef.of(deployment)))
        return report
    return ensure_system(cluster, settings, grant, None, full=False)


def _read_route_config(cluster: Cluster) -> KnownRouteConfig | None:
    """The proxy's ConfigMap as stored, or None when its version or route table cannot be trusted."""
    current = cluster.get(CONFIG_MAP, SYSTEM_NAMESPACE, PROXY_CONFIG)
    if current is None:
        return None
    meta = current.get("metadata") or {}
    version, uid = str(meta.get("resourceVersion") or ""), str(meta.get("uid") or "")
    table = table_from_json((current.get("data") or {}).get(ROUTES_JSON))
    if not version or not uid or table is None:
        return None
    return KnownRouteConfig(version, table, annotations_of(current).get(HASH_ANNOTATION, ""), uid)


def _route_dependents(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The proxy's ConfigMap and Deployment among its rendered objects."""
    by_key = {(kind_of(obj), ObjectRef.of(obj).name): obj for obj in objects}
    return by_key[(CONFIG_MAP, PROXY_CONFIG)], by_key[(DEPLOYMENT, PROXY_DEPLOYMENT)]


def _apply_if_changed(cluster: Cluster, obj: dict[str, Any], report: SystemReport) -> None:
    ref = ObjectRef.of(obj)
    current = cluster.get(kind_of(obj), ref.namespace, ref.name)
    wanted = annotations_of(obj).get(HASH_ANNOTATION)
    if current is not None and annotations_of(current).get(HASH_ANNOTATION) == wanted:
        return
    cluster.apply(obj)
    report.applied.append(str(ref))
