"""Desired state -> Kubernetes objects (pure renderers), the Regional reconcile loop, cluster clients.

The package face is lazy (PEP 562): a name is imported from its module on first use, so a Lambda
handler that imports one module (`gco.reconcile.sweep`) does not pay for the others (the stream
handler's batch processing, say) at cold start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gco.reconcile.errors import (
        ClusterAuthError,
        ClusterConfigError,
        ClusterError,
        ClusterRejectedError,
        ClusterUnavailableError,
        PoisonRecordError,
        ReconcileError,
    )
    from gco.reconcile.handler import handle_stream_event
    from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
    from gco.reconcile.objects import ObjectRef
    from gco.reconcile.planner import Plan, StatusWrite, plan
    from gco.reconcile.port import Cluster
    from gco.reconcile.reconciler import Reconciler
    from gco.reconcile.record_writes import Outcome
    from gco.reconcile.render import render
    from gco.reconcile.settings import DEFAULT_SETTINGS, RenderSettings
    from gco.reconcile.sweep import SweepReport, sweep

# Each public name and the module that defines it.
_HOMES = {
    "ClusterAuthError": "errors",
    "ClusterConfigError": "errors",
    "ClusterError": "errors",
    "ClusterRejectedError": "errors",
    "ClusterUnavailableError": "errors",
    "PoisonRecordError": "errors",
    "ReconcileError": "errors",
    "handle_stream_event": "handler",
    "KubeCluster": "kubeapi",
    "RetryPolicy": "kubeapi",
    "static_token": "kubeapi",
    "ObjectRef": "objects",
    "Plan": "planner",
    "StatusWrite": "planner",
    "plan": "planner",
    "Cluster": "port",
    "Outcome": "record_writes",
    "Reconciler": "reconciler",
    "render": "render",
    "DEFAULT_SETTINGS": "settings",
    "RenderSettings": "settings",
    "SweepReport": "sweep",
    "sweep": "sweep",
}

__all__ = [
    "DEFAULT_SETTINGS",
    "Cluster",
    "ClusterAuthError",
    "ClusterConfigError",
    "ClusterError",
    "ClusterRejectedError",
    "ClusterUnavailableError",
    "KubeCluster",
    "ObjectRef",
    "Outcome",
    "Plan",
    "PoisonRecordError",
    "ReconcileError",
    "Reconciler",
    "RenderSettings",
    "RetryPolicy",
    "StatusWrite",
    "SweepReport",
    "handle_stream_event",
    "plan",
    "render",
    "static_token",
    "sweep",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
