"""The Region's shared objects: gco's namespaces and the inference proxy, kept as desired.

`ensure_system` is level-triggered like the endpoint reconciler: it reads each object, compares
the content digest gco sealed it with, and applies (server-side, gco's field manager) only what
is missing or different; so a Region already as desired costs reads and no write. The reconciler
runs it on start (its first reconcile in an execution environment), on every sweep, and after a
reconcile that changed a route (the route table is rendered into the proxy's configuration).

Nothing here is ever deleted with an endpoint: the proxy objects carry no endpoint label, and the
endpoint planner only ever deletes objects labelled with the endpoint's name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gco.reconcile.access import Grant
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
from gco.reconcile.render_proxy import PROXY_CONFIG, PROXY_DEPLOYMENT, render_proxy
from gco.reconcile.routes import RouteTable, route_table
from gco.reconcile.settings import RenderSettings

ROUTE_ROLE = "route"
# The proxy's objects rendered from the route table: its configuration, and the Deployment whose pod
# template carries the configuration's digest.
ROUTE_DEPENDENT = frozenset({(CONFIG_MAP, PROXY_CONFIG), (DEPLOYMENT, PROXY_DEPLOYMENT)})


@dataclass
class SystemReport:
    """What one pass applied (object keys), and the route table the proxy now serves."""

    applied: list[str] = field(default_factory=list)
    routes: RouteTable = field(default_factory=RouteTable)


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

    Parameters:
        observed: managed objects already listed (the sweep's snapshot); None lists the routes afresh
            (the route Ingresses, which the renderer puts in the system namespace only: one list).
        full: check every object (on start and in the sweep). A route refresh after a reconcile
            (False) checks only what the route table is rendered into, the proxy's ConfigMap and
            Deployment (its configuration digest): the namespaces, the proxy's Service and its
            autoscaler do not depend on the routes and were ensured before any endpoint was applied.
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


def _apply_if_changed(cluster: Cluster, obj: dict[str, Any], report: SystemReport) -> None:
    ref = ObjectRef.of(obj)
    current = cluster.get(kind_of(obj), ref.namespace, ref.name)
    wanted = annotations_of(obj).get(HASH_ANNOTATION)
    if current is not None and annotations_of(current).get(HASH_ANNOTATION) == wanted:
        return
    cluster.apply(obj)
    report.applied.append(str(ref))
