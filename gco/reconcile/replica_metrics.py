"""Each endpoint's replicas as the sweep saw them, for CloudWatch: ready and desired per endpoint, and
how many endpoints of the Region are short of ready.

Where they go: the sweep Lambda prints them as CloudWatch embedded metric format (EMF) records
(`lambdas/sweep.py`, through Powertools), which CloudWatch Logs turns into metrics of namespace
`gco` ("Embedding metrics within logs", CloudWatch User Guide). EMF needs no `cloudwatch:PutMetricData`
grant: the function writes only its own log group. The Regional dashboard reads them
(`gco.deployment.dashboards`) and the Regional stack alarms on `EndpointsNotReady`.

Counted from the sweep's snapshot (one list per managed kind) before it reconciles: an endpoint's
Deployments (its stable version and a canary), `spec.replicas` desired (Kubernetes' default 1) and
`status.readyReplicas` ready (absent while none is ready; Kubernetes API reference, DeploymentStatus).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

REPLICAS_READY_METRIC = "ReplicasReady"
REPLICAS_DESIRED_METRIC = "ReplicasDesired"
NOT_READY_METRIC = "EndpointsNotReady"
ENDPOINT_DIMENSION = "endpoint"


def replica_counts(objects: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """(ready, desired) replicas over an endpoint's Deployments."""
    ready = desired = 0
    for obj in objects:
        if obj.get("kind") != "Deployment":
            continue
        desired += int((obj.get("spec") or {}).get("replicas", 1))
        ready += int((obj.get("status") or {}).get("readyReplicas", 0))
    return ready, desired


def not_ready(replicas: Mapping[str, tuple[int, int]]) -> list[str]:
    """The endpoints with fewer ready replicas than desired, by name."""
    return sorted(name for name, (ready, desired) in replicas.items() if ready < desired)
