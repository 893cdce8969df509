"""Cluster-wide settings the renderers need beyond the record (one value per installation)."""

from __future__ import annotations

from dataclasses import dataclass

from gco.addons import PROMETHEUS_ADDRESS
from gco.nodes import GPU_TAINT, NEURON_TAINT


@dataclass(frozen=True, kw_only=True)
class RenderSettings:
    """Parameters of the Regional cluster that every endpoint shares.

    Attributes:
        ingress_class: IngressClass of the shared route objects (the AWS Load Balancer Controller's).
        prometheus_address: where KEDA's Prometheus triggers query GPU and queue metrics.
        model_sync_image: image of the init container that syncs `model_source` from S3.
        model_dir: where the synced model is mounted in the serving container.
        gpu_taint_key: the taint on the GPU node groups (NoSchedule) that GPU pods tolerate
            (gco.nodes.GPU_TAINT, which the stack puts on the node groups).
        neuron_taint_key: the taint on Neuron node groups (gco.nodes.NEURON_TAINT).
    """

    ingress_class: str = "alb"
    prometheus_address: str = PROMETHEUS_ADDRESS
    model_sync_image: str = "public.ecr.aws/aws-cli/aws-cli:2.17.0"
    model_dir: str = "/models"
    gpu_taint_key: str = GPU_TAINT.key
    neuron_taint_key: str = NEURON_TAINT.key
    termination_grace_seconds: int = 60


DEFAULT_SETTINGS = RenderSettings()
