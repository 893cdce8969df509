"""Operators' way into a Regional cluster: access entries for the configured people, and a path to the
Kubernetes API endpoint.

Each admin principal gets an EKS access entry with `AmazonEKSClusterAdminPolicy`, each viewer one with
`AmazonEKSViewPolicy`, both cluster-wide (EKS access policies: no aws-auth ConfigMap). The endpoint is
private unless config makes it public-and-private for named networks only; networks allowed to the
private endpoint (a VPN, a peered VPC, or this VPC's CIDR for a CloudShell VPC environment) get HTTPS
on the cluster security group. docs/deploy.md ("Operators' access") walks through both paths.
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from stacks.config import OperatorsConfig

ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
VIEW_POLICY = "AmazonEKSViewPolicy"


def endpoint_access(config: OperatorsConfig) -> eks.EndpointAccess:
    """Private, or public-and-private open only to `public_cidrs`."""
    if config.api_endpoint == "public_and_private":
        return eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*config.public_cidrs)
    return eks.EndpointAccess.PRIVATE


class OperatorAccess(Construct):
    """The access entries of the configured operators and HTTPS from their private networks."""

    def __init__(
        self, scope: Construct, construct_id: str, *, cluster: eks.Cluster, config: OperatorsConfig
    ) -> None:
        super().__init__(scope, construct_id)
        cluster_wide = eks.AccessScopeType.CLUSTER
        for kind, policy, principals in (
            ("Admin", ADMIN_POLICY, config.admin_principal_arns),
            ("Viewer", VIEW_POLICY, config.viewer_principal_arns),
        ):
            for index, principal in enumerate(principals):
                cluster.grant_access(
                    f"Operator{kind}{index}",
                    principal,
                    [eks.AccessPolicy.from_access_policy_name(policy, access_scope_type=cluster_wide)],
                )
        for cidr in config.private_cidrs:
            cluster.connections.allow_from(
                ec2.Peer.ipv4(cidr), ec2.Port.tcp(443), f"operators ({cidr}) to the Kubernetes API"
            )
