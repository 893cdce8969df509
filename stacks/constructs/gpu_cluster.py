"""The Region's EKS cluster with its managed node groups and the kubectl provider of its add-ons."""

from __future__ import annotations

from typing import cast

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from constructs import Construct

from stacks.config import NodeGroupConfig
from stacks.constructs.cluster_addons import kubectl_provider_options
from stacks.constructs.gpu_nodes import add_node_groups


class GpuCluster(Construct):
    """EKS (endpoint private or allow-listed, all control-plane logs, envelope-encrypted secrets), node
    groups (stacks/constructs/gpu_nodes.py) and a kubectl provider for the cluster add-ons."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        version: str,
        vpc: ec2.IVpc,
        key: kms.IKey,
        gpu: NodeGroupConfig,
        system: NodeGroupConfig,
        endpoint_access: eks.EndpointAccess,
    ) -> None:
        super().__init__(scope, construct_id)
        self.cluster = eks.Cluster(
            self,
            "Cluster",
            cluster_name=name,
            version=eks.KubernetesVersion.of(version),
            vpc=vpc,
            vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
            endpoint_access=endpoint_access,
            kubectl_provider_options=kubectl_provider_options(self, vpc, version),
            secrets_encryption_key=key,
            cluster_logging=list(eks.ClusterLoggingTypes),
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            output_config_command=False,
        )
        self.system, self.gpu_groups = add_node_groups(self.cluster, name=name, gpu=gpu, system=system)
        # The same cluster as the ICluster that Addon, HelmChart and KubernetesManifest take. jsii
        # registers Cluster as implementing ICluster, but the generated Python class does not declare
        # the protocol's `kubectl_provider_options` property, so mypy cannot match the two itself.
        self.cluster_interface = cast(eks.ICluster, self.cluster)
