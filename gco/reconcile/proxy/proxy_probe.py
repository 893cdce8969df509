"""Whether the Region's proxy serves a route: a small port, and its adapter on the API server's pod proxy.

An endpoint is reported `running` only once a request through its Region's proxy would reach it. The
proxy's pods each answer, on their status port, the digest of the route their nginx serves for an
endpoint (`proxy_conf.py`); `PodProxyProbe` asks every ready proxy pod through the API server's
proxy subresource (`GET /api/v1/namespaces/gco-system/pods/<pod>:<port>/proxy/<path>`, authorized as
`get` on `pods/proxy`, kubernetes.io/docs/tasks/access-application-cluster/access-cluster-services/
#manually-constructing-apiserver-proxy-urls), the one way to reach a pod that needs no network path
from the reconciler into the cluster. A pod being deleted is skipped: it is out of the Service's
endpoints, so no new request reaches it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from gco.reconcile.objects import POD, SYSTEM_NAMESPACE, Kind
from gco.reconcile.proxy.render_proxy import proxy_labels
from gco.reconcile.proxy.routes import STATUS_PORT, STATUS_ROUTE_PATH


class ProxyProbe(Protocol):
    """Asks the Region's proxy what it serves."""

    def unserved(self, endpoint: str, digest: str) -> str | None:
        """None when every ready proxy pod serves the endpoint's route with this digest; else why not."""
        ...


class PodProxyCluster(Protocol):
    """What `PodProxyProbe` needs of the cluster client (`kubeapi.KubeCluster` has both)."""

    def list_in(self, kind: Kind, namespace: str, labels: Mapping[str, str]) -> list[dict[str, Any]]: ...

    def proxy_get(self, namespace: str, pod: str, port: int, path: str) -> tuple[int, str]: ...


class PodProxyProbe:
    """`ProxyProbe` through the API server's pod proxy (module docstring)."""

    def __init__(self, cluster: PodProxyCluster) -> None:
        self.cluster = cluster

    def unserved(self, endpoint: str, digest: str) -> str | None:
        pods = [pod for pod in self.cluster.list_in(POD, SYSTEM_NAMESPACE, proxy_labels()) if _serving(pod)]
        if not pods:
            return "no proxy pod is ready"
        behind = 0
        for pod in pods:
            name = str(pod["metadata"]["name"])
            code, body = self.cluster.proxy_get(
                SYSTEM_NAMESPACE, name, STATUS_PORT, STATUS_ROUTE_PATH + endpoint
            )
            if code != 200 or body.strip() != digest:
                behind += 1
        if behind:
            return f"waiting for the proxy to serve the route ({behind} of {len(pods)} proxy pods)"
        return None


def _serving(pod: Mapping[str, Any]) -> bool:
    """A pod not being deleted whose Ready condition is True (what puts it in a Service's endpoints)."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
