"""Pure rendering of autoscalers and disruption budgets.

cpu and memory alone render a `HorizontalPodAutoscaler` (autoscaling/v2); any of gpu, gpu_memory
or queue_depth renders a KEDA `ScaledObject` instead (which also carries cpu/memory triggers),
since an HPA cannot read DCGM or engine metrics without an adapter, nor scale to zero.
"""

from __future__ import annotations

from typing import Any

from gco.endpoints.spec import KEDA_METRICS, Autoscaling, AutoscalingMetric
from gco.reconcile.objects import DEPLOYMENT, HPA, PDB, SCALED_OBJECT
from gco.reconcile.settings import RenderSettings

# The pods of Deployment D only: D's ReplicaSets are `D-<pod-template-hash>` and their pods
# `D-<hash>-<5 random>`, both parts alphanumeric (kubernetes pkg/controller/deployment/sync.go
# names the ReplicaSet; the pod's generateName suffix is apimachinery's `rand.String(5)`).
# PromQL anchors `=~` at both ends, so `D-.*` would also select the pods of any Deployment whose
# name begins `D-` (another endpoint `D-x`, or D's own role objects `D--decode`).
POD_OF = "{deployment}-[a-z0-9]+-[a-z0-9]+"
QUERIES = {
    "gpu": 'avg(DCGM_FI_DEV_GPU_UTIL{{namespace="{ns}",pod=~"{pods}"}})',
    "gpu_memory": (
        'avg(100 * DCGM_FI_DEV_FB_USED{{namespace="{ns}",pod=~"{pods}"}}'
        ' / (DCGM_FI_DEV_FB_USED{{namespace="{ns}",pod=~"{pods}"}}'
        ' + DCGM_FI_DEV_FB_FREE{{namespace="{ns}",pod=~"{pods}"}}))'
    ),
    "queue_depth": (
        'sum(vllm:num_requests_waiting{{namespace="{ns}",pod=~"{pods}"}})'
        ' or sum(tgi_queue_size{{namespace="{ns}",pod=~"{pods}"}})'
    ),
}


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def uses_keda(autoscaling: Autoscaling) -> bool:
    return any(metric.type in KEDA_METRICS for metric in autoscaling.metrics)


def _hpa_metric(metric: AutoscalingMetric) -> dict[str, Any]:
    return {
        "type": "Resource",
        "resource": {
            "name": metric.type,
            "target": {"type": "Utilization", "averageUtilization": round(metric.target)},
        },
    }


def _trigger(metric: AutoscalingMetric, namespace: str, deployment: str, settings: RenderSettings) -> Any:
    if metric.type in ("cpu", "memory"):
        return {
            "type": metric.type,
            "metricType": "Utilization",
            "metadata": {"value": _number(metric.target)},
        }
    query = QUERIES[metric.type].format(ns=namespace, pods=POD_OF.format(deployment=deployment))
    return {
        "type": "prometheus",
        "name": metric.type.replace("_", "-"),
        "metadata": {
            "serverAddress": settings.prometheus_address,
            "query": query,
            "threshold": _number(metric.target),
        },
    }


def autoscaler(
    meta: dict[str, Any],
    deployment: str,
    namespace: str,
    autoscaling: Autoscaling,
    settings: RenderSettings,
) -> dict[str, Any]:
    """An HPA or a KEDA ScaledObject (named like `meta`) scaling the Deployment `deployment`."""
    target = {"apiVersion": DEPLOYMENT.api_version, "kind": DEPLOYMENT.kind, "name": deployment}
    if uses_keda(autoscaling):
        return {
            "apiVersion": SCALED_OBJECT.api_version,
            "kind": SCALED_OBJECT.kind,
            "metadata": meta,
            "spec": {
                "scaleTargetRef": {
                    "apiVersion": DEPLOYMENT.api_version,
                    "kind": DEPLOYMENT.kind,
                    "name": deployment,
                },
                "minReplicaCount": autoscaling.min_replicas,
                "maxReplicaCount": autoscaling.max_replicas,
                "pollingInterval": 15,
                "cooldownPeriod": 300,
                "triggers": [_trigger(m, namespace, deployment, settings) for m in autoscaling.metrics],
            },
        }
    return {
        "apiVersion": HPA.api_version,
        "kind": HPA.kind,
        "metadata": meta,
        "spec": {
            "scaleTargetRef": target,
            "minReplicas": max(1, autoscaling.min_replicas),
            "maxReplicas": autoscaling.max_replicas,
            "metrics": [_hpa_metric(metric) for metric in autoscaling.metrics],
        },
    }


def disruption_budget(meta: dict[str, Any], match_labels: dict[str, str]) -> dict[str, Any]:
    """At most one serving pod of the role down at a time during voluntary disruptions."""
    return {
        "apiVersion": PDB.api_version,
        "kind": PDB.kind,
        "metadata": meta,
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": match_labels}},
    }
