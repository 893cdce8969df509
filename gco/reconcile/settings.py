"""Cluster-wide settings the renderers need beyond the record (one value per installation)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gco.reconcile.addons import PROMETHEUS_ADDRESS
from gco.reconcile.model_sources import S3Prefix
from gco.reconcile.nodes import GPU_TAINT, NEURON_TAINT
from gco.reconcile.proxy.proxy_settings import DEFAULT_PROXY, PROXY_INGRESS_CLASS, ProxySettings


@dataclass(frozen=True, kw_only=True)
class RenderSettings:
    """Parameters of the Regional cluster that every endpoint shares.

    Attributes:
        ingress_class: IngressClass of the route objects (the one the shared proxy implements).
        prometheus_address: where KEDA's Prometheus triggers query GPU and queue metrics.
        model_sync_image: image of the init container that syncs `model_source` from S3.
        model_dir: where the synced model is mounted in the serving container.
        gpu_taint_key: the taint on the GPU node groups (NoSchedule) that GPU pods tolerate
            (gco.reconcile.nodes.GPU_TAINT, which the stack puts on the node groups).
        neuron_taint_key: the taint on Neuron node groups (gco.reconcile.nodes.NEURON_TAINT).
        proxy: the shared proxy's images, size and autoscaling.
        gpu_instance_types: the instance types of the Region's GPU node groups, from which a GPU
            container's CPU and memory requests are derived (`gco.reconcile.nodes.gpu_pod_requests`; none
            known: it requests only what its spec's `resources` say).
        model_sources: the S3 prefixes endpoint pods may read models from (their Pod Identity
            role's), or None where they are not known (then no `model_source` is refused here).
        addons: the cluster add-ons the Region has (gco.reconcile.addons names, from the stack's
            `GCO_CLUSTER_ADDONS`), or None where that is not known (then nothing is refused
            up front and a missing CRD is still reported when the API server answers 404).
        endpoint_secrets: the Secrets Manager secrets endpoints may name in `secret_env` (names,
            `prefix/*`, ARNs: gco.secrets.endpoint_secrets), or None where not known (nothing refused here).
        gpu_root_gib: the GPU nodes' root volume (GiB), the model storage of an instance type
            without instance store (gco.reconcile.node_storage); None where not known.
        load_balancer_cidrs: the CIDRs of the load balancer's own subnets (no node or pod there), the
            only peers the proxy's NetworkPolicy admits to its serving port (`render_network.py`);
            None where not known (the local stack): then no policy isolates the proxy.
        control_plane_cidrs: the CIDRs of the cluster's subnets, where the API server's pod proxy
            connects from: the only peers admitted to the proxy's status port; None where not known
            (then, too, no policy isolates the proxy).
    """

    ingress_class: str = PROXY_INGRESS_CLASS
    prometheus_address: str = PROMETHEUS_ADDRESS
    model_sync_image: str = "public.ecr.aws/aws-cli/aws-cli:2.17.0"
    model_dir: str = "/models"
    gpu_taint_key: str = GPU_TAINT.key
    neuron_taint_key: str = NEURON_TAINT.key
    termination_grace_seconds: int = 60
    proxy: ProxySettings = field(default_factory=lambda: DEFAULT_PROXY)
    addons: frozenset[str] | None = None
    gpu_instance_types: tuple[str, ...] = ()
    model_sources: tuple[S3Prefix, ...] | None = None
    endpoint_secrets: tuple[str, ...] | None = None
    load_balancer_cidrs: tuple[str, ...] | None = None
    control_plane_cidrs: tuple[str, ...] | None = None
    gpu_root_gib: int | None = None


DEFAULT_SETTINGS = RenderSettings()
