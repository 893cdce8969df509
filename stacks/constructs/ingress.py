"""The Region's load balancer controller: the AWS Load Balancer Controller (Helm) with its own role.

It runs in `TargetGroupBinding` mode only: it registers the shared proxy's pod IPs in the front
door's target group (`stacks/constructs/front_door.py`), which the stack owns, so the API Gateway VPC link can
name a listener that exists at deploy time. Its role (EKS Pod Identity) can therefore describe load
balancing and network objects and register targets in that one target group; it cannot create
load balancers, so an Ingress of class `alb` would be refused by design. gco's routes name the
proxy's own IngressClass, which the proxy implements from the configuration the reconciler renders.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from gco.deployment.charts import CHART_RELEASES, LOAD_BALANCER_CONTROLLER
from stacks.constructs.cluster_addons import CHART_TIMEOUT
from stacks.constructs.iam import managed_role, statement

# Its chart and version, with the Kubernetes versions it documents: gco/deployment/charts.py.
CHART = CHART_RELEASES[LOAD_BALANCER_CONTROLLER]
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "aws-load-balancer-controller"
POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"
# Describe calls take no resource in IAM (Elastic Load Balancing and EC2 do not scope them).
DESCRIBE_ACTIONS = [
    "elasticloadbalancing:DescribeListeners",
    "elasticloadbalancing:DescribeLoadBalancers",
    "elasticloadbalancing:DescribeTags",
    "elasticloadbalancing:DescribeTargetGroupAttributes",
    "elasticloadbalancing:DescribeTargetGroups",
    "elasticloadbalancing:DescribeTargetHealth",
    "ec2:DescribeAvailabilityZones",
    "ec2:DescribeInstances",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeVpcs",
]
REGISTER_ACTIONS = ["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"]


class LoadBalancerController(Construct):
    """The controller's role and Pod Identity association (the agent is the cluster add-on's), and the
    Helm release."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        cluster: eks.ICluster,
        vpc_id: str,
        target_group_arn: str,
        pod_identity_agent: eks.Addon,
        system_nodes: eks.Nodegroup,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.role, self.policy = managed_role(
            self,
            "Role",
            role_name=f"{name}-{stack.region}",
            service=POD_IDENTITY_SERVICE,
            description="AWS Load Balancer Controller: the proxy's pods in the front door's target group",
            statements=[
                statement("Describe", DESCRIBE_ACTIONS, ["*"]),
                statement("FrontDoorTargets", REGISTER_ACTIONS, [target_group_arn]),
            ],
        )
        # EKS Pod Identity assumes the role with session tags.
        self.role.assume_role_policy.add_statements(  # type: ignore[union-attr]
            iam.PolicyStatement(
                actions=["sts:TagSession"], principals=[iam.ServicePrincipal(POD_IDENTITY_SERVICE)]
            )
        )
        self.association = eks.CfnPodIdentityAssociation(
            self,
            "PodIdentity",
            cluster_name=cluster.cluster_name,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=self.role.role_arn,
        )
        self.association.node.add_dependency(pod_identity_agent)
        self.chart = eks.HelmChart(
            self,
            "Chart",
            cluster=cluster,
            chart=CHART.chart,
            repository=CHART.repository,
            version=CHART.version,
            namespace=NAMESPACE,
            release=CHART.chart,
            wait=True,
            timeout=CHART_TIMEOUT,
            values={
                "clusterName": cluster.cluster_name,
                "region": stack.region,
                "vpcId": vpc_id,
                "replicaCount": 2,
                "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
                "createIngressClassResource": False,
                "enableServiceMutatorWebhook": False,
                "enableShield": False,
                "enableWaf": False,
                "enableWafv2": False,
            },
        )
        # Its two replicas run on the system nodes: waiting for them before one joined would time out.
        self.chart.node.add_dependency(self.association, self.policy, system_nodes)
