"""The kubelet's copy of a ConfigMap volume on the local stack: the route shards as the proxy pod's
projected volume holds them, which lag the API server's as EKS's do.

In EKS the proxy's nginx reads the shards from a projected volume, which the kubelet rewrites only
when it syncs the pod. The Kubernetes documentation ("Mounted ConfigMaps are updated automatically",
kubernetes.io/docs/concepts/configuration/configmap/#mounted-configmaps-are-updated-automatically):
"When a ConfigMap currently consumed in a volume is updated, projected keys are eventually updated
as well. The kubelet checks whether the mounted ConfigMap is fresh on every periodic sync. [...] As
a result, the total delay from the moment when the ConfigMap is updated to the moment when new keys
are projected to the Pod can be as long as the kubelet sync period + cache propagation delay, where
the cache propagation delay depends on the chosen cache type (it equals to watch propagation delay,
ttl of cache, or zero correspondingly)." The kubelet's configuration reference
(kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/): `syncFrequency` "is the max
period between synchronizing running containers and config. Default: "1m"", and
`configMapAndSecretChangeDetectionStrategy` defaults to `Watch` (the cache is fed by a watch, so
its delay is the watch's, well under a second). EKS's kubelet keeps both defaults. Each pod's worker
re-queues the pod `wait.Jitter(resyncInterval, 0.5)` after a sync (k8s.io/kubernetes
`pkg/kubelet/pod_workers.go`, `workerResyncIntervalJitterFactor = 0.5`): the next periodic sync
comes 1 to 1.5 minutes after the last one.

A sync also comes at once when the pod changes: the kubelet hands every pod update from the API
server to the pod's worker (`pkg/kubelet/kubelet.go` `HandlePodUpdates`), and each sync remounts the
ConfigMap and projected volumes (`pkg/kubelet/volumemanager/volume_manager.go`
`WaitForAttachAndMount` -> `ReprocessPod`). The reconciler annotates the proxy's pods after it
writes shards for that reason (`gco.reconcile.proxy.proxy_probe`).

`MountedShards` models both: `read()` answers the copy made at the last sync, and syncs (lists the
shards from the stand-in) when the period has passed since the last sync or the pod's
resourceVersion changed since. A period of 0 syncs on every read (the routes as stored). It does not
model: the watch's own propagation delay, the atomic writer's per-file timing (the copy changes as a
whole, as the `..data` link swap makes it), or a sync that fails.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from gco.local.standin import StandInKubeAPI
from gco.reconcile.objects import CONFIG_MAP, SYSTEM_NAMESPACE, selector
from gco.reconcile.proxy.route_shards import shard_labels

KUBELET_SYNC_S = 60.0  # `syncFrequency`'s default (module docstring), EKS's too
SYNC_JITTER = 0.5  # pod_workers.go `workerResyncIntervalJitterFactor`


class MountedShards:
    """The route shards in one proxy pod's projected volume, as its kubelet last wrote them.

    Parameters:
        api: the Region's stand-in (the shards and the pod are read from it).
        pod: the name of the proxy pod in the system namespace (its updates trigger a sync).
        sync_s: the kubelet's sync period in seconds (0: every read sees the stored shards).
        jitter: the fraction of `sync_s` a sync's next period may add (drawn from `rng`).
        clock: monotonic seconds (injected in tests).
        rng: the jitter's draw (injected in tests).
    """

    def __init__(
        self,
        api: StandInKubeAPI,
        pod: str,
        *,
        sync_s: float = KUBELET_SYNC_S,
        jitter: float = SYNC_JITTER,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.api = api
        self.pod = pod
        self.sync_s = sync_s
        self.jitter = jitter
        self._clock = clock
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._copy: list[dict[str, Any]] | None = None
        self._next_sync = 0.0
        self._pod_version: str | None = None
        self.syncs = 0  # how many times the copy was made (for tests and the benchmark)

    def read(self) -> list[dict[str, Any]]:
        """The shard ConfigMaps as mounted now (module docstring)."""
        if self.sync_s <= 0:
            return self._stored()
        with self._lock:
            version = self.api.pod_version(SYSTEM_NAMESPACE, self.pod)
            now = self._clock()
            if self._copy is None or now >= self._next_sync or version != self._pod_version:
                self._copy = self._stored()
                self._pod_version = version
                self._next_sync = now + self.sync_s * (1 + self.jitter * self._rng.random())
                self.syncs += 1
            return self._copy

    def _stored(self) -> list[dict[str, Any]]:
        return self.api.list(CONFIG_MAP, SYSTEM_NAMESPACE, selector(shard_labels()))[0]
