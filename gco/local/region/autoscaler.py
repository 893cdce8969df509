"""The HorizontalPodAutoscaler controller on the local stack: each endpoint's HPA holds its
Deployment's replicas within min..max from a metric the local engines report.

The real controller reads pod CPU or memory from metrics-server. Local engines are processes
without a pod's resource requests, so this stand-in reads the load they report on `/metrics`
(`vllm:num_requests_running`, what the fake engine and vLLM export) and counts one request in
flight on a replica as 100% utilization of the HPA's metric (cpu or memory alike). The rest is
the controller's algorithm (Kubernetes docs, "Horizontal Pod Autoscaling", algorithm details):
`desired = ceil(current * utilization / target)`, no change within a 10% tolerance, clamped to
`minReplicas..maxReplicas`; a Deployment with no ready replica is held at its current count.
It writes `spec.replicas` of the Deployment as its own field manager (the reconciler leaves
replicas unset for autoscaled endpoints) and the HPA's `status` (`currentReplicas`,
`desiredReplicas`, `currentMetrics`, `lastScaleTime`) as the controller does.

Fault injection (tests): `stuck = True` makes it act as a controller that cannot scale (its
metrics unavailable): the HPA's status keeps reporting the current count and the Deployment keeps
it, whatever `minReplicas` says.

It does not model: the scale-down stabilization window (5 minutes by default: here the count
follows the load at once), scaling policies and rates, multiple metrics, or KEDA ScaledObjects.
"""

from __future__ import annotations

import logging
import math
import re
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import Any

from gco.engines import vllm
from gco.local.region.kubelet import LocalKubelet
from gco.local.region.loop import SyncLoop
from gco.local.standin import StandInKubeAPI
from gco.reconcile.objects import DEPLOYMENT, ENDPOINT_LABEL, HPA

log = logging.getLogger(__name__)
MANAGER = "horizontal-pod-autoscaler"
TOLERANCE = 0.1
LOAD_METRIC = re.compile(
    rf"^{re.escape(vllm.RUNNING_METRIC)}(?:\{{[^}}]*\}})?\s+([0-9.eE+-]+)\s*$", re.MULTILINE
)
SCRAPE_TIMEOUT_S = 1.0


def desired_replicas(current: int, utilization: float, target: float, low: int, high: int) -> int:
    """The HPA algorithm for one metric: ratio, tolerance, clamp."""
    if current <= 0:
        return max(low, min(high, current))
    ratio = utilization / target
    wanted = current if abs(ratio - 1.0) <= TOLERANCE else math.ceil(current * ratio)
    return max(low, min(high, wanted))


def running_requests(url: str) -> float | None:
    """The engine's requests in flight from its /metrics, or None when it does not answer."""
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=SCRAPE_TIMEOUT_S) as response:  # noqa: S310 - loopback
            text = response.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError):
        return None
    found = LOAD_METRIC.findall(text)
    return sum(float(value) for value in found) if found else None


class LocalAutoscaler:
    """Autoscales one stand-in cluster's endpoint Deployments; `sync()` once or `start()` a loop."""

    def __init__(self, api: StandInKubeAPI, kubelet: LocalKubelet) -> None:
        self.api = api
        self.kubelet = kubelet
        self.stuck = False
        self._loop = SyncLoop(self.sync, name="local-hpa")

    def sync(self) -> None:
        hpas, _ = self.api.list(HPA, None, "")
        for hpa in hpas:
            meta = hpa.get("metadata") or {}
            if ENDPOINT_LABEL in (meta.get("labels") or {}) and not meta.get("deletionTimestamp"):
                self._scale(hpa)

    def _scale(self, hpa: dict[str, Any]) -> None:
        meta, spec = hpa["metadata"], hpa.get("spec") or {}
        namespace, target = meta["namespace"], (spec.get("scaleTargetRef") or {}).get("name", "")
        deployment = self.api.get(DEPLOYMENT, namespace, target)
        if deployment is None:
            return
        low, high = int(spec.get("minReplicas", 1)), int(spec.get("maxReplicas", 1))
        goal = float(
            (((spec.get("metrics") or [{}])[0].get("resource") or {}).get("target") or {}).get(
                "averageUtilization", 80
            )
        )
        current = int((deployment.get("spec") or {}).get("replicas", 1))
        loads = [
            load
            for url in self.kubelet.ready_urls(namespace, target)
            if (load := running_requests(url)) is not None
        ]
        utilization = 100.0 * sum(loads) / len(loads) if loads else None
        wanted = (
            max(low, min(high, current))
            if utilization is None
            else desired_replicas(current, utilization, goal, low, high)
        )
        if self.stuck:
            wanted = current
        previous = hpa.get("status") or {}
        scaled = wanted != current
        if scaled:
            self.api.apply_as(
                MANAGER,
                {
                    "apiVersion": DEPLOYMENT.api_version,
                    "kind": DEPLOYMENT.kind,
                    "metadata": {"name": target, "namespace": namespace},
                    "spec": {"replicas": wanted},
                },
            )
            log.info(
                "hpa %s/%s: %d -> %d replicas (utilization %s)",
                namespace,
                target,
                current,
                wanted,
                utilization,
            )
        status: dict[str, Any] = {
            "currentReplicas": current,
            "desiredReplicas": wanted,
            "currentMetrics": []
            if utilization is None
            else [
                {
                    "type": "Resource",
                    "resource": {
                        "name": ((spec.get("metrics") or [{}])[0].get("resource") or {}).get("name", "cpu"),
                        "current": {"averageUtilization": round(utilization)},
                    },
                }
            ],
        }
        when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if scaled else previous.get("lastScaleTime")
        if when:
            status["lastScaleTime"] = when
        self.api.write_status(HPA, namespace, meta["name"], status)

    def start(self, interval: float = 0.5) -> LocalAutoscaler:
        self._loop.start(interval)
        return self

    def stop(self) -> None:
        self._loop.stop()
