"""GPU utilisation in CloudWatch: the Amazon CloudWatch Observability EKS add-on, its configuration,
and the GPU metrics that configuration makes it publish (pure: the stacks install it,
`stacks/constructs/observability.py`; the dashboards draw the metrics, `gco.deployment.dashboards`).

What the add-on is and what it needs ("Quick start with the Amazon CloudWatch Observability EKS
add-on", CloudWatch User Guide, docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/
Container-Insights-setup-EKS-addon.html): add-on `amazon-cloudwatch-observability` installs the
CloudWatch agent (Container Insights with enhanced observability) and Fluent Bit; from add-on version
3.1.0 its permissions come through EKS Pod Identity, a role with the AWS managed policy
`CloudWatchAgentServerPolicy` associated with service account `cloudwatch-agent`.

What it publishes for NVIDIA GPUs: the add-on runs NVIDIA's DCGM exporter on GPU nodes (its chart's
`dcgmExporter.enabled: true`, aws-observability/helm-charts `charts/amazon-cloudwatch-observability/
values.yaml`) and the agent turns its readings into metrics of namespace `ContainerInsights` when both
`enhanced_container_insights` and `accelerated_compute_metrics` (default true) are on under
`logs.metrics_collected.kubernetes` of its configuration. The metric names and the dimension sets
each is published with are the agent's own EMF declarations (aws/amazon-cloudwatch-agent
`translator/translate/otel/exporter/awsemf/kubernetes.go`, `getGPUMetricDeclarations`, and
`translator/translate/otel/receiver/awscontainerinsight/utils.go`); `GPU_DECLARATIONS` copies the two
the dashboards draw. `Service` is the Kubernetes Service that selects the pod: each endpoint's.

Fluent Bit (every container's log to CloudWatch Logs) is turned off (`containerLogs.enabled: false`,
the chart's value and the add-on's configuration key): the engines' logs are read with kubectl and
shipping them all would be billed per GB; an operator who wants them sets it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ADDON_NAME = "amazon-cloudwatch-observability"
# The agent's service account, which the Pod Identity association names (the quick start's
# `--pod-identity-associations serviceAccount=cloudwatch-agent,roleArn=...`).
AGENT_SERVICE_ACCOUNT = "cloudwatch-agent"
AGENT_POLICY = "CloudWatchAgentServerPolicy"
NAMESPACE = "ContainerInsights"
CLUSTER_DIMENSION = "ClusterName"
SERVICE_DIMENSION = "Service"

POD_GPU_UTILISATION = "pod_gpu_utilization"
NODE_GPU_UTILISATION = "node_gpu_utilization"
# metric -> the dimension sets the agent publishes it with (getGPUMetricDeclarations).
GPU_DECLARATIONS: dict[str, tuple[tuple[str, ...], ...]] = {
    POD_GPU_UTILISATION: (
        ("ClusterName",),
        ("ClusterName", "Namespace"),
        ("ClusterName", "Namespace", "Service"),
        ("ClusterName", "Namespace", "PodName"),
        ("ClusterName", "Namespace", "PodName", "FullPodName"),
        ("ClusterName", "Namespace", "PodName", "FullPodName", "GpuDevice"),
    ),
    NODE_GPU_UTILISATION: (
        ("ClusterName",),
        ("ClusterName", "NodeName", "InstanceId"),
        ("ClusterName", "NodeName", "InstanceId", "InstanceType", "GpuDevice"),
    ),
}
# The per-endpoint dimension set the dashboards draw: an endpoint's pods are selected by its Service.
ENDPOINT_GPU_DIMENSIONS = (CLUSTER_DIMENSION, "Namespace", SERVICE_DIMENSION)


def addon_configuration() -> dict[str, Any]:
    """The add-on's configuration values: the agent's Container Insights with enhanced observability
    and accelerated-compute (GPU) metrics, and no Fluent Bit (module docstring)."""
    kubernetes = {"enhanced_container_insights": True, "accelerated_compute_metrics": True}
    return {
        "agent": {"config": {"logs": {"metrics_collected": {"kubernetes": kubernetes}}}},
        "containerLogs": {"enabled": False},
    }


def published_gpu_metrics(configuration: Mapping[str, Any]) -> dict[str, tuple[tuple[str, ...], ...]]:
    """The GPU metrics (name -> dimension sets, namespace `NAMESPACE`) the agent publishes under
    `configuration`: none unless enhanced observability is on and accelerated-compute metrics are
    not turned off (the agent's `EnhancedContainerInsightsEnabled` and
    `AcceleratedComputeMetricsEnabled`)."""
    kubernetes = (
        configuration.get("agent", {}).get("config", {}).get("logs", {}).get("metrics_collected", {})
    ).get("kubernetes", {})
    enhanced = kubernetes.get("enhanced_container_insights", False) is True
    accelerated = kubernetes.get("accelerated_compute_metrics", True) is True
    return dict(GPU_DECLARATIONS) if enhanced and accelerated else {}
