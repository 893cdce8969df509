"""The cluster add-ons a Region may have, and how the stack tells the reconciler which it has.

The Regional stack installs the add-ons (`stacks/constructs/cluster_addons.py`) and sets `ADDONS_ENV` on the
reconciler to the comma-separated names of those present; the reconciler reads it with
`addons_from_env` and, for an endpoint whose autoscaling needs what its Region lacks, reports a
terminal status naming it (`missing_addons`). Prometheus' in-cluster address is defined here too:
the stack installs the server under this release and namespace, and KEDA's triggers query it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gco.endpoints.namespaces import SYSTEM_NAMESPACE

ADDONS_ENV = "GCO_CLUSTER_ADDONS"

METRICS_SERVER = "metrics-server"
DEVICE_PLUGIN = "nvidia-device-plugin"
CLUSTER_AUTOSCALER = "cluster-autoscaler"
KEDA = "keda"
PROMETHEUS = "prometheus"
DCGM_EXPORTER = "dcgm-exporter"

# Every Region has the metrics server, the device plugin and the autoscaler; these only where the
# config enables them.
SCALING_ADDONS = (KEDA, PROMETHEUS, DCGM_EXPORTER)

# What each autoscaling metric needs in its Region (cpu and memory: the HPA's resource metrics).
NEEDS = {
    "cpu": (METRICS_SERVER,),
    "memory": (METRICS_SERVER,),
    "gpu": (KEDA, PROMETHEUS, DCGM_EXPORTER),
    "gpu_memory": (KEDA, PROMETHEUS, DCGM_EXPORTER),
    "queue_depth": (KEDA, PROMETHEUS),
}

PROMETHEUS_NAMESPACE = SYSTEM_NAMESPACE
PROMETHEUS_RELEASE = "prometheus"
# The chart names the server's Service `<release>-server` and serves it on port 80.
PROMETHEUS_ADDRESS = f"http://{PROMETHEUS_RELEASE}-server.{PROMETHEUS_NAMESPACE}.svc:80"
# The labels of the Prometheus server's pods, which scrape the endpoints' /metrics (prometheus-community
# helm-charts `charts/prometheus/templates/_helpers.tpl`: `prometheus.server.matchLabels` is the common
# `app.kubernetes.io/name` (the chart's name) and `app.kubernetes.io/instance` (the release), and
# `app.kubernetes.io/component: server`).
PROMETHEUS_SERVER_LABELS = {
    "app.kubernetes.io/name": "prometheus",
    "app.kubernetes.io/instance": PROMETHEUS_RELEASE,
    "app.kubernetes.io/component": "server",
}


def addons_value(names: Iterable[str]) -> str:
    """The `ADDONS_ENV` value for the add-ons `names` (sorted, comma-separated)."""
    return ",".join(sorted(set(names)))


def addons_from_env(env: Mapping[str, str]) -> frozenset[str] | None:
    """The add-ons the Region has, or None when `ADDONS_ENV` is unset (not known: assume all)."""
    raw = env.get(ADDONS_ENV)
    if raw is None:
        return None
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


def missing_addons(metrics: Iterable[str], present: frozenset[str] | None) -> list[str]:
    """The add-ons that the autoscaling `metrics` need and the Region lacks, in a stable order."""
    if present is None:
        return []
    needed = dict.fromkeys(name for metric in metrics for name in NEEDS.get(metric, ()))
    return [name for name in needed if name not in present]
