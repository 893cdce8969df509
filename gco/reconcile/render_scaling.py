"""Pure rendering of autoscalers and disruption budgets.

cpu and memory alone render a `HorizontalPodAutoscaler` (autoscaling/v2); any of gpu, gpu_memory
or queue_depth renders a KEDA `ScaledObject` instead (which also carries cpu/memory triggers),
since an HPA cannot read DCGM or engine metrics without an adapter, nor scale to zero.
"""

from __future__ import annotations

from typing import Any

from gco import engines
from gco.endpoints.spec import KEDA_METRICS, Autoscaling, AutoscalingMetric
from gco.reconcile.objects import DEPLOYMENT, HPA, PDB, SCALED_OBJECT
from gco.reconcile.settings import RenderSettings

# The pods of Deployment D only: D's ReplicaSets are `D-<pod-template-hash>` and their pods
# `D-<hash>-<5 random>`, both parts alphanumeric (kubernetes pkg/controller/deployment/sync.go
# names the ReplicaSet; the pod's generateName suffix is apimachinery's `rand.String(5)`).
# PromQL anchors `=~` at both ends, so `D-.*` would also select the pods of any Deployment whose
# name begins `D-` (another endpoint `D-x`, or D's own role objects `D--decode`).
QUERIES = {
    "gpu": 'avg(DCGM_FI_DEV_GPU_UTIL{{namespace="{ns}",pod=~"{pods}"}})',
    "gpu_memory": (
        'avg(100 * DCGM_FI_DEV_FB_USED{{namespace="{ns}",pod=~"{pods}"}}'
        ' / (DCGM_FI_DEV_FB_USED{{namespace="{ns}",pod=~"{pods}"}}'
        ' + DCGM_FI_DEV_FB_FREE{{namespace="{ns}",pod=~"{pods}"}}))'
    ),
}


def queue_query() -> str:
    """The queue_depth query: the waiting requests of whichever registered framework's queue metric the
    pods serve (`gco.engines`), as a template of `ns` and `pods` like QUERIES'."""
    metrics = [f.queue_metric for f in engines.frameworks() if f.queue_metric is not None]
    return " or ".join(f'sum({metric}{{{{namespace="{{ns}}",pod=~"{{pods}}"}}}})' for metric in metrics)


# The characters of both a pod-template-hash and a generated name's random suffix
# (k8s.io/apimachinery `pkg/util/rand`: `alphanums`, used by `String` and `SafeEncodeString`).
_NAME_CHARS = "[bcdfghjklmnpqrstvwxz2456789]"
# A pod-template-hash is `SafeEncodeString` of a decimal uint32 (k8s.io/kubernetes
# `pkg/controller/controller_utils.go`, `ComputeHash`): 1 to 10 characters.
_HASH_MAX = 10
# A generated name keeps at most 58 characters of its base before the 5 random ones
# (k8s.io/apiserver `pkg/storage/names/generate.go`: maxGeneratedNameLength = 63 - 5).
_BASE_MAX, _SUFFIX = 58, 5


def pod_name_pattern(deployment: str) -> str:
    """A regular expression matching the names of the Deployment's pods (PromQL anchors it).

    A Deployment `d`'s ReplicaSet is `d-<hash>` and its pods are named from the base `d-<hash>-`, cut
    to 58 characters, plus 5 random ones. `d-.*` also matched the pods of `d-2`, another endpoint's;
    this pattern fixes the shape instead: the hash and the suffix never contain `-`, so a pod of
    `d-2` (`d-2-<hash>-<suffix>`) has a segment too many. It is exact unless another Deployment of
    the namespace has a name of 57 characters or more that starts with `d-` (then the cut can leave
    that Deployment's pods the same shape as `d`'s; `tests/unit/reconcile/test_render_scaling.py`
    checks both sides of that line).
    """
    room = _BASE_MAX - len(deployment) - 2  # hash characters that fit before the base is cut
    whole = f"{deployment}-{_NAME_CHARS}{{1,{min(room, _HASH_MAX)}}}-{_NAME_CHARS}{{{_SUFFIX}}}"
    if room >= _HASH_MAX:
        return whole
    if room >= -1:  # a longer hash is cut: `d-` and its first room + 1 characters, no dash
        cut = f"{deployment}-{_NAME_CHARS}{{{room + 1 + _SUFFIX}}}"
    else:  # the name itself is cut
        cut = f"{deployment[:_BASE_MAX]}{_NAME_CHARS}{{{_SUFFIX}}}"
    return f"{whole}|{cut}" if room >= 1 else cut


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
    template = queue_query() if metric.type == "queue_depth" else QUERIES[metric.type]
    query = template.format(ns=namespace, pods=pod_name_pattern(deployment))
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
