"""Whether the Region's proxy serves a route: a small port, and its adapter on the API server's pod proxy.

An endpoint is reported `running` only once a request through its Region's proxy would reach it. The
proxy's pods each answer, on their status port, the digest of the route their nginx serves for an
endpoint (`proxy_conf.py`); `PodProxyProbe` asks every ready proxy pod through the API server's
proxy subresource (`GET /api/v1/namespaces/gco-system/pods/<pod>:<port>/proxy/<path>`, authorized as
`get` on `pods/proxy`, kubernetes.io/docs/tasks/access-application-cluster/access-cluster-services/
#manually-constructing-apiserver-proxy-urls), the one way to reach a pod that needs no network path
from the reconciler into the cluster. A pod being deleted is skipped: it is out of the Service's
endpoints, so no new request reaches it.

A batch asks each pod once, not once per endpoint: `GET /shards` answers the version of every route
shard the pod's nginx loaded (`route_shards.shard_version`, a digest of the shard's routes), and an
endpoint whose route is in a shard the route keeper wrote or read at the version the pod loaded is
served by that pod. Only an endpoint that answer does not settle (its shard written since by another
process, or by this one again; a pod whose nginx.conf predates the versions) is asked about alone.

It also makes the proxy pods take a route change in seconds (docs/proxy.md, "A route change"): the
kubelet refreshes a pod's ConfigMap volumes on each sync of the pod, which comes every
`syncFrequency` (1 minute by default) or at once when the pod changes. `refresh` annotates every
ready proxy pod (`REFRESH_ANNOTATION`, a new value each time) after the route keeper wrote shards,
and `unserved` does so again for each pod still behind (its kubelet may have synced the pod before
its ConfigMap watch delivered the shard). The kubelet, from k8s.io/kubernetes:

- `pkg/kubelet/kubelet.go` `HandlePodUpdates`: each pod update from the API server is dispatched to
  the pod's worker (`podWorkers.UpdatePod`, `SyncPodUpdate`), which runs `SyncPod` for it now;
- `pkg/kubelet/volumemanager/volume_manager.go` `WaitForAttachAndMount`, called by every `SyncPod`:
  "Some pods expect to have Setup called over and over again to update. Remount plugins for which
  this is true. (Atomically updating volumes, like Downward API, depend on this to update the
  contents of the volume)." (`ReprocessPod`), and the ConfigMap and projected plugins' `RequiresRemount`
  answer true (`pkg/volume/configmap/configmap.go`, `pkg/volume/projected/projected.go`), so their
  `SetUp` runs again and writes the ConfigMaps' current data (`atomic_writer.go`);
- the ConfigMaps' data come from the kubelet's watch of each referenced ConfigMap
  (`configMapAndSecretChangeDetectionStrategy: Watch`, the default,
  kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/).

The grant this needs is the reconciler's `patch` of Pods in `gco-system` (`access.py`); the proxy's
pods get nothing: no token, no watch.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from gco.reconcile.batches import each_leaf
from gco.reconcile.errors import ClusterError
from gco.reconcile.objects import POD, SYSTEM_NAMESPACE, Kind
from gco.reconcile.proxy.render_proxy import proxy_labels
from gco.reconcile.proxy.route_shards import ShardVersion, parse_versions
from gco.reconcile.proxy.routes import STATUS_PORT, STATUS_ROUTE_PATH, STATUS_SHARDS_PATH

log = logging.getLogger(__name__)
Result = TypeVar("Result")
MAX_PODS_AT_ONCE = 8  # proxy pods asked or annotated at once (a Region runs a few)
# Set on each proxy pod (never on the Deployment's template, which would roll it) to a new value
# whenever its kubelet should sync it now (module docstring).
REFRESH_ANNOTATION = "gco.dev/routes-refreshed"


class ProxyProbe(Protocol):
    """Asks the Region's proxy what it serves."""

    def unserved(self, endpoint: str, digest: str) -> str | None:
        """None when every ready proxy pod serves the endpoint's route with this digest; else why not."""
        ...

    def unserved_all(
        self,
        digests: Mapping[str, str],
        pods: Sequence[str] | None = None,
        versions: Mapping[str, ShardVersion] | None = None,
    ) -> dict[str, str | None]:
        """`unserved` of each endpoint (key) and route digest (value), from one list of the ready
        pods (`pods`: as `refresh` just listed them; None: list them now). `versions`: for an
        endpoint, a shard version known to hold its route as digested (a pod that loaded that
        version serves the route)."""
        ...

    def refresh(self) -> list[str]:
        """Have every ready proxy pod load the route shards as stored now, rather than after the
        kubelet's next periodic sync; returns the pods told."""
        ...


def behind(pods: int, total: int) -> str:
    """Why `running` waits: `pods` of the `total` ready proxy pods do not serve the route yet."""
    if total == 0:
        return "no proxy pod is ready"
    return f"waiting for the proxy to serve the route ({pods} of {total} proxy pods)"


class PodProxyCluster(Protocol):
    """What `PodProxyProbe` needs of the cluster client (`kubeapi.KubeCluster` has both)."""

    def list_in(self, kind: Kind, namespace: str, labels: Mapping[str, str]) -> list[dict[str, Any]]: ...

    def proxy_get(self, namespace: str, pod: str, port: int, path: str) -> tuple[int, str]: ...

    def annotate_pod(self, namespace: str, pod: str, annotations: Mapping[str, str]) -> bool: ...


class PodProxyProbe:
    """`ProxyProbe` through the API server's pod proxy (module docstring).

    Parameters:
        cluster: the Region's cluster client.
        clock: wall-clock seconds, written into `REFRESH_ANNOTATION` (injected in tests).
    """

    def __init__(self, cluster: PodProxyCluster, *, clock: Callable[[], float] = time.time) -> None:
        self.cluster = cluster
        self._clock = clock
        self._count = itertools.count(1)  # two refreshes in one clock tick still differ

    def unserved(self, endpoint: str, digest: str) -> str | None:
        return self.unserved_all({endpoint: digest})[endpoint]

    def unserved_all(
        self,
        digests: Mapping[str, str],
        pods: Sequence[str] | None = None,
        versions: Mapping[str, ShardVersion] | None = None,
    ) -> dict[str, str | None]:
        """One list of the ready proxy pods (none when `pods` are given: as `refresh` just listed
        them), then the pods asked concurrently, each once for the shard versions it loaded (with
        `versions`) and about each route that answer does not settle; every pod behind on any route
        is annotated once, so that its kubelet syncs it again.

        Raises:
            ClusterAuthError: the API server refused the list or a pod-proxy request (401, 403).
            ClusterUnavailableError: no answer after the client's retries.
        """
        pods = list(pods) if pods is not None else self._ready_pods()
        behind_on = each_pod(pods, lambda name: self._behind_on(name, digests, versions))
        lagging = [name for name, endpoints in zip(pods, behind_on, strict=True) if endpoints]
        answers: dict[str, str | None] = {}
        for endpoint in digests:
            missing = sum(endpoint in endpoints for endpoints in behind_on)
            answers[endpoint] = behind(missing, len(pods)) if missing or not pods else None
        if lagging:
            try:  # a pod synced before its kubelet had the shard: sync it again
                self._annotate(lagging)
            except ClusterError as error:  # only a speed-up: the periodic sync loads the shard anyway
                log.warning("could not have proxy pods %s sync now: %s", ", ".join(lagging), error)
        return answers

    def refresh(self) -> list[str]:
        """Annotate every ready proxy pod (module docstring); returns them.

        Raises:
            ClusterError: the API server refused or did not answer a list or a patch.
        """
        pods = self._ready_pods()
        self._annotate(pods)
        return pods

    def _behind_on(
        self, pod: str, digests: Mapping[str, str], versions: Mapping[str, ShardVersion] | None
    ) -> set[str]:
        """The endpoints whose route the pod does not serve as digested: one question for the shard
        versions it loaded (with `versions`), then one for each route that answer does not settle."""
        loaded = self._loaded(pod) if versions else {}
        return {
            endpoint
            for endpoint, digest in digests.items()
            if not served_by_version(endpoint, versions, loaded) and not self._serves(pod, endpoint, digest)
        }

    def _serves(self, pod: str, endpoint: str, digest: str) -> bool:
        code, body = self.cluster.proxy_get(SYSTEM_NAMESPACE, pod, STATUS_PORT, STATUS_ROUTE_PATH + endpoint)
        return code == 200 and body.strip() == digest

    def _loaded(self, pod: str) -> dict[int, str]:
        """The shard versions the pod's nginx loaded (none from a pod that does not answer them)."""
        code, body = self.cluster.proxy_get(SYSTEM_NAMESPACE, pod, STATUS_PORT, STATUS_SHARDS_PATH)
        return parse_versions(body) if code == 200 else {}

    def _ready_pods(self) -> list[str]:
        listed = self.cluster.list_in(POD, SYSTEM_NAMESPACE, proxy_labels())
        return [str(pod["metadata"]["name"]) for pod in listed if _serving(pod)]

    def _annotate(self, pods: list[str]) -> None:
        """A new `REFRESH_ANNOTATION` value on each pod: an update, so its kubelet syncs it now."""
        value = f"{self._clock():.3f}-{next(self._count)}"
        each_pod(
            pods, lambda name: self.cluster.annotate_pod(SYSTEM_NAMESPACE, name, {REFRESH_ANNOTATION: value})
        )


def each_pod(pods: Sequence[str], work: Callable[[str], Result]) -> list[Result]:
    """`work(pod)` for every pod, concurrently (each a round trip to the API server, none depending on
    another: a batch waits for one, not one per pod), results in the pods' order; the first error
    is raised once all are done."""
    return each_leaf(work, pods, MAX_PODS_AT_ONCE)


def served_by_version(
    endpoint: str, versions: Mapping[str, ShardVersion] | None, loaded: Mapping[int, str]
) -> bool:
    """Whether a pod that loaded these shard versions serves the endpoint's route: its shard is
    loaded at a version known to hold the route."""
    known = (versions or {}).get(endpoint)
    return known is not None and loaded.get(known.shard) == known.version


def _serving(pod: Mapping[str, Any]) -> bool:
    """A pod not being deleted whose Ready condition is True (what puts it in a Service's endpoints)."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
