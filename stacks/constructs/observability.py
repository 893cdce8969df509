"""The collector of the Region's GPU utilisation: the Amazon CloudWatch Observability EKS add-on
(Container Insights with enhanced observability, with its DCGM exporter on the GPU nodes), configured
by `gco.deployment.container_insights.addon_configuration`.

Its permissions come through EKS Pod Identity, as the Cluster Autoscaler's and the load balancer
controller's do: a role that `pods.eks.amazonaws.com` assumes (and tags its sessions), associated with
the agent's service account by the add-on itself (`PodIdentityAssociations` of `AWS::EKS::Addon`),
holding the one policy the add-on's documentation names, the AWS managed `CloudWatchAgentServerPolicy`
("Quick start with the Amazon CloudWatch Observability EKS add-on", CloudWatch User Guide; the
suppression of AwsSolutions-IAM4 says why in `stacks/nag/observability_suppressions.py`).
"""

from __future__ import annotations

from typing import cast

from aws_cdk import CfnResource
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from gco.deployment.container_insights import (
    ADDON_NAME,
    AGENT_POLICY,
    AGENT_SERVICE_ACCOUNT,
    addon_configuration,
)


class ContainerInsights(Construct):
    """The add-on and its agent's Pod Identity role `<cluster>-cloudwatch-agent`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        cluster_name: str,
        pod_identity_agent: eks.Addon,
        system_nodes: eks.Nodegroup,
    ) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "AgentRole",
            role_name=f"{cluster_name}-cloudwatch-agent",
            assumed_by=iam.ServicePrincipal("pods.eks.amazonaws.com").with_session_tags(),
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(AGENT_POLICY)],
            description="CloudWatch agent of the Container Insights add-on: this cluster's metrics",
        )
        self.addon = eks.Addon(
            self,
            "Addon",
            addon_name=ADDON_NAME,
            cluster=cluster,
            configuration_values=addon_configuration(),
        )
        cast(CfnResource, self.addon.node.default_child).add_property_override(
            "PodIdentityAssociations",
            [{"ServiceAccount": AGENT_SERVICE_ACCOUNT, "RoleArn": self.role.role_arn}],
        )
        # The association needs the Pod Identity agent on the nodes, and the agent's pods a node.
        self.addon.node.add_dependency(pod_identity_agent, system_nodes)
