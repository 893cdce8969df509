"""Desired state -> Kubernetes objects (pure renderers), the Regional reconcile loop, cluster clients."""

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
from gco.reconcile.reconciler import Outcome, Reconciler
from gco.reconcile.render import render
from gco.reconcile.settings import DEFAULT_SETTINGS, RenderSettings
from gco.reconcile.sweep import SweepReport, sweep

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
