"""The Region's shared objects: gco's namespaces and the inference proxy, kept as desired.

`ensure_system` is level-triggered like the endpoint reconciler: it reads each object, compares
the content digest gco sealed it with, and applies (server-side, gco's field manager) only what
is missing or different; so a Region already as desired costs reads and no write. The reconciler
runs it on start (its first reconcile in an execution environment) and on every sweep. None of
these objects depends on the routes (the route keeper, `route_keeper.py`, keeps those), so a route
change never changes the proxy's Deployment.

Nothing here is ever deleted with an endpoint: the proxy objects carry no endpoint label, and the
endpoint planner only ever deletes objects labelled with the endpoint's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gco.reconcile.access import Grant
from gco.reconcile.objects import (
    HASH_ANNOTATION,
    MANAGED_BY,
    MANAGER,
    NAMESPACE,
    PROXY_PORT_NAME,
    ObjectRef,
    annotations_of,
    content_hash,
    kind_of,
)
from gco.reconcile.port import Cluster
from gco.reconcile.proxy.render_proxy import STATUS_PORT_NAME, proxy_labels, render_proxy
from gco.reconcile.render_network import default_deny, no_instance_metadata, proxy_policy
from gco.reconcile.settings import RenderSettings


@dataclass
class SystemReport:
    """What one pass applied (object keys: the system objects, then the route shards written)."""

    applied: list[str] = field(default_factory=list)


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


def network_objects(settings: RenderSettings, grant: Grant) -> list[dict[str, Any]]:
    """The default deny and the instance metadata's refusal of each endpoint namespace and, where the
    load balancer's and the control plane's subnets are known, the proxy's policy (render_network.py)."""
    objects = [
        policy(namespace)
        for namespace in grant.endpoint_namespaces
        for policy in (default_deny, no_instance_metadata)
    ]
    if settings.load_balancer_cidrs is not None and settings.control_plane_cidrs is not None:
        policy = proxy_policy(
            proxy_labels(),
            serving=(PROXY_PORT_NAME,),
            status=(STATUS_PORT_NAME,),
            load_balancer_cidrs=settings.load_balancer_cidrs,
            control_plane_cidrs=settings.control_plane_cidrs,
        )
        objects.append(policy)
    return objects


def ensure_system(cluster: Cluster, settings: RenderSettings, grant: Grant) -> SystemReport:
    """Apply gco's namespaces, the proxy's objects and the network policies where they differ from
    what is rendered."""
    report = SystemReport()
    objects = [
        *namespace_objects(grant.namespaces),
        *render_proxy(settings.proxy),
        *network_objects(settings, grant),
    ]
    for obj in objects:
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
