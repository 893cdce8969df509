"""The Kubernetes add-ons of a Regional cluster: what makes GPU pods schedulable and autoscalable.

Every Region: the EKS Pod Identity agent and metrics-server (EKS add-ons), the NVIDIA device plugin
(the AL2023 NVIDIA AMI has the driver, not the plugin that advertises `nvidia.com/gpu`), and the
Cluster Autoscaler, which scales the GPU node groups from zero (see `stacks/constructs/gpu_nodes.py` and
docs/deploy.md for why this autoscaler). Where config enables it (`keda_regions`): KEDA, a
Prometheus server (the source of KEDA's gpu, gpu_memory and queue_depth triggers) and the DCGM
exporter on GPU nodes. Charts are pinned by version and installed by the cluster's kubectl provider
(a Lambda in the private subnets, since the API endpoint is private). `present` names what was
installed, for the reconciler's environment (`gco.reconcile.addons.ADDONS_ENV`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, cast

import yaml
from aws_cdk import ArnFormat, CfnResource, Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from gco.deployment.charts import CHART_RELEASES, ChartRelease, installed_charts
from gco.deployment.kubernetes import autoscaler_tag
from gco.reconcile import addons
from gco.reconcile.nodes import GPU_PRESENT_LABEL, GPU_TAINT, system_labels
from stacks.constructs.iam import managed_role, statement

AUTOSCALER_SERVICE_ACCOUNT = "cluster-autoscaler"
# How long each Helm release may take to become ready (the provider's `helm --wait --timeout`); the
# kubectl provider's own Lambda allows 15 minutes per call.
CHART_TIMEOUT = Duration.minutes(10)
SYSTEM_NAMESPACE = "kube-system"
# Reads the Cluster Autoscaler needs with node-group auto-discovery and scale-from-zero; none of
# them takes a resource-level permission.
AUTOSCALER_DESCRIBE = [
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
]
AUTOSCALER_SCALE = ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"]


@dataclass(frozen=True)
class Chart:
    """A pinned chart (`gco.deployment.charts`, with its documented Kubernetes range) installed as
    `release` into `namespace`."""

    pin: ChartRelease
    namespace: str
    release: str


CHARTS = {
    addons.DEVICE_PLUGIN: Chart(
        CHART_RELEASES[addons.DEVICE_PLUGIN], SYSTEM_NAMESPACE, "nvidia-device-plugin"
    ),
    addons.CLUSTER_AUTOSCALER: Chart(
        CHART_RELEASES[addons.CLUSTER_AUTOSCALER], SYSTEM_NAMESPACE, "cluster-autoscaler"
    ),
    addons.KEDA: Chart(CHART_RELEASES[addons.KEDA], "keda", "keda"),
    addons.PROMETHEUS: Chart(
        CHART_RELEASES[addons.PROMETHEUS], addons.PROMETHEUS_NAMESPACE, addons.PROMETHEUS_RELEASE
    ),
    addons.DCGM_EXPORTER: Chart(
        CHART_RELEASES[addons.DCGM_EXPORTER], addons.PROMETHEUS_NAMESPACE, "dcgm-exporter"
    ),
}
# The EKS add-ons (names as EKS lists them); EKS picks the default version for the cluster's Kubernetes.
EKS_ADDONS = {"PodIdentityAgent": "eks-pod-identity-agent", "MetricsServer": addons.METRICS_SERVER}
# The VPC CNI as a managed add-on with its network policy agent on, which enforces the NetworkPolicies
# the reconciler renders (gco/reconcile/render_network.py): "set enableNetworkPolicy to true" in the
# add-on's configuration values (docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html;
# the network policy controller runs in the EKS control plane). EKS installs the CNI self-managed on
# a new cluster, so the managed add-on takes over its fields (`ResolveConflicts: OVERWRITE`).
VPC_CNI = "vpc-cni"
VPC_CNI_CONFIGURATION = {"enableNetworkPolicy": "true"}
GPU_NODES = {"nodeSelector": {GPU_PRESENT_LABEL: "true"}, "tolerations": [GPU_TAINT.toleration()]}
SYSTEM_NODES = {"nodeSelector": system_labels()}


class KubectlLayerError(ValueError):
    """No kubectl layer package is installed for the cluster's Kubernetes version."""


def kubectl_layer(scope: Construct, kubernetes_version: str) -> Any:
    """The CDK kubectl layer whose kubectl matches the cluster's minor version (kubectl supports one
    minor version of skew; the layers are published per version as `aws-cdk.lambda-layer-kubectl-vNN`).

    Raises:
        KubectlLayerError: that version's layer package is not installed (names the package).
    """
    minor = kubernetes_version.split(".", 1)[1]
    try:
        module = importlib.import_module(f"aws_cdk.lambda_layer_kubectl_v{minor}")
    except ImportError:
        raise KubectlLayerError(
            f"Kubernetes {kubernetes_version} needs the kubectl layer: pip install "
            f"'aws-cdk.lambda-layer-kubectl-v{minor}'"
        ) from None
    return getattr(module, f"KubectlV{minor}Layer")(scope, "KubectlLayer")


def kubectl_provider_options(
    scope: Construct, vpc: ec2.IVpc, kubernetes_version: str
) -> eks.KubectlProviderOptions:
    """The kubectl provider (kubectl and helm in a Lambda layer), in the private subnets."""
    return eks.KubectlProviderOptions(
        kubectl_layer=kubectl_layer(scope, kubernetes_version),
        private_subnets=vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnets,
    )


def chart_values(
    name: str,
    *,
    cluster_name: str,
    region: str,
    kubernetes_version: str,
    expander_priorities: dict[int, list[str]] | None = None,
) -> dict[str, Any]:
    """The values each chart is installed with (pure: tested without a synth).

    `expander_priorities` (node group name patterns by priority,
    `stacks.constructs.gpu_nodes.priority_expander`) switches the Cluster Autoscaler to the priority
    expander, least-waste breaking its ties.
    """
    if name == addons.DEVICE_PLUGIN:
        return dict(GPU_NODES)
    if name == addons.CLUSTER_AUTOSCALER:
        return {
            "cloudProvider": "aws",
            "awsRegion": region,
            "autoDiscovery": {"clusterName": cluster_name},
            "rbac": {"serviceAccount": {"create": True, "name": AUTOSCALER_SERVICE_ACCOUNT}},
            # The autoscaler's minor version follows the cluster's (its compatibility rule).
            "image": {"tag": autoscaler_tag(kubernetes_version)},
            **({"expanderPriorities": yaml.safe_dump(expander_priorities)} if expander_priorities else {}),
            "extraArgs": {
                "expander": "priority,least-waste" if expander_priorities else "least-waste",
                "balance-similar-node-groups": True,
                "skip-nodes-with-system-pods": False,
                "scale-down-unneeded-time": "10m",
            },
            **SYSTEM_NODES,
        }
    if name == addons.KEDA:
        return dict(SYSTEM_NODES)
    if name == addons.PROMETHEUS:
        return {
            "alertmanager": {"enabled": False},
            "prometheus-pushgateway": {"enabled": False},
            "prometheus-node-exporter": {"enabled": False},
            "kube-state-metrics": {"enabled": False},
            # Autoscaling reads the last minutes only: no volume (and no EBS CSI driver) needed.
            "server": {"persistentVolume": {"enabled": False}, "retention": "2d", **SYSTEM_NODES},
        }
    if name == addons.DCGM_EXPORTER:
        # Scraped through its Service by the Prometheus chart's annotation-driven job.
        return {
            **GPU_NODES,
            "serviceMonitor": {"enabled": False},
            "service": {"annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9400"}},
        }
    raise KeyError(name)


class ClusterAddons(Construct):
    """EKS add-ons, the device plugin, the Cluster Autoscaler (with its Pod Identity role) and, with
    `scaling`, KEDA, Prometheus and the DCGM exporter."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        cluster_name: str,
        kubernetes_version: str,
        scaling: bool,
        system_nodes: eks.Nodegroup,
        expander_priorities: dict[int, list[str]] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        eks_addons = {
            construct: eks.Addon(self, construct, addon_name=name, cluster=cluster)
            for construct, name in EKS_ADDONS.items()
        }
        self.vpc_cni = eks.Addon(
            self, "VpcCni", addon_name=VPC_CNI, cluster=cluster, configuration_values=VPC_CNI_CONFIGURATION
        )
        cast(CfnResource, self.vpc_cni.node.default_child).add_property_override(
            "ResolveConflicts", "OVERWRITE"
        )
        self.role, policy = managed_role(
            self,
            "AutoscalerRole",
            role_name=f"{cluster_name}-cluster-autoscaler",
            service="pods.eks.amazonaws.com",
            session_tags=True,
            description="Cluster Autoscaler: scale this cluster's node groups",
            statements=[
                statement("DescribeScaling", AUTOSCALER_DESCRIBE, ["*"]),
                statement(
                    "DescribeOwnNodegroups",
                    ["eks:DescribeNodegroup"],
                    [
                        stack.format_arn(
                            service="eks", resource="nodegroup", resource_name=f"{cluster_name}/*/*"
                        )
                    ],
                ),
                statement(
                    "ScaleOwnNodeGroups",
                    AUTOSCALER_SCALE,
                    [
                        stack.format_arn(
                            service="autoscaling",
                            resource="autoScalingGroup",
                            resource_name="*:autoScalingGroupName/*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    ],
                    StringEquals={"aws:ResourceTag/eks:cluster-name": cluster_name},
                ),
            ],
        )
        association = eks.CfnPodIdentityAssociation(
            self,
            "AutoscalerIdentity",
            cluster_name=cluster.cluster_name,
            namespace=CHARTS[addons.CLUSTER_AUTOSCALER].namespace,
            service_account=AUTOSCALER_SERVICE_ACCOUNT,
            role_arn=self.role.role_arn,
        )
        self.pod_identity_agent = eks_addons["PodIdentityAgent"]
        association.node.add_dependency(policy, self.pod_identity_agent)
        # The load balancer controller's chart is the front door's (stacks/constructs/ingress.py).
        names = [name for name in installed_charts(scaling) if name in CHARTS]
        self.charts: dict[str, eks.HelmChart] = {}
        for name in names:
            chart = CHARTS[name]
            self.charts[name] = eks.HelmChart(
                self,
                "".join(part.capitalize() for part in name.split("-")),
                cluster=cluster,
                repository=chart.pin.repository,
                chart=chart.pin.chart,
                version=chart.pin.version,
                namespace=chart.namespace,
                release=chart.release,
                create_namespace=chart.namespace != SYSTEM_NAMESPACE,
                values=chart_values(
                    name,
                    cluster_name=cluster_name,
                    region=stack.region,
                    kubernetes_version=kubernetes_version,
                    expander_priorities=expander_priorities,
                ),
                # Helm's own default is 5 minutes; a chart waits for its pods, which need a Ready
                # system node (below), and a slow image pull must not roll the stack back.
                wait=True,
                timeout=CHART_TIMEOUT,
            )
            # Every chart's pods run on the system nodes (or tolerate the GPU taint and wait for a
            # GPU node): installing before a system node joined would time out.
            self.charts[name].node.add_dependency(system_nodes)
        self.charts[addons.CLUSTER_AUTOSCALER].node.add_dependency(association)
        self.present = [addons.METRICS_SERVER, *names]
