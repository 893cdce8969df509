"""The Region's network: a VPC of two AZs, its NAT, flow logs and VPC endpoints.

Three kinds of subnet per zone: public (the NAT gateway only), private (nodes and their pods, the
EKS cluster's interfaces, Lambdas, the runner) and load balancer (`LOAD_BALANCER_SUBNETS`: the front
door's internal ALB and its VPC link, nothing else). The last are isolated (no route out: an internal
ALB and a VPC link reach only the VPC) and hold no node, so no pod takes an address there (the VPC
CNI gives a pod an address of its node's subnet): their CIDRs admit the load balancer and no pod in
the proxy's NetworkPolicy (gco/reconcile/render_network.py), as the EKS User Guide recommends load
balancers in "separate subnets" ("Cluster VPC and subnet considerations"). They come after the
others in the VPC's address plan, so adding them left the existing subnets' CIDRs as they were.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from gco.deployment.config import ZONES_PER_VPC
from stacks.constructs.iam import managed_role, statement
from stacks.constructs.retained import retained_name

LOAD_BALANCER_SUBNETS = "load-balancer"  # the subnet group of the front door's ALB and VPC link

# Interface endpoints (private DNS on) for what nodes and functions call most: image pulls (ECR's API
# and registry; the layers themselves come from S3), role credentials (STS, Pod Identity's token
# exchange goes through the agent), logs. S3 and DynamoDB take gateway endpoints (no hourly price).
INTERFACE_ENDPOINTS = {
    "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
    "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
}
GATEWAY_ENDPOINTS = {
    "S3": ec2.GatewayVpcEndpointAwsService.S3,
    "DynamoDb": ec2.GatewayVpcEndpointAwsService.DYNAMODB,
}


class Network(Construct):
    """Two AZs, public subnets for NAT only, private subnets for nodes, Lambdas and the runner,
    isolated subnets for the front door's load balancer alone, flow logs; one NAT gateway or one per
    zone; VPC endpoints for ECR, S3, STS, DynamoDB and Logs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        cidr: str,
        key: kms.IKey,
        retention: logs.RetentionDays,
        nat_per_zone: bool = False,
        endpoints: bool = True,
        zones: list[str] | None = None,
        load_balancer_mask: int = 26,
    ) -> None:
        super().__init__(scope, construct_id)
        # Named zones where the config names them; else two, which CDK takes from Fn::GetAZs at deploy.
        where: dict[str, object] = {"availability_zones": zones} if zones else {"max_azs": ZONES_PER_VPC}
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            vpc_name=name,
            ip_addresses=ec2.IpAddresses.cidr(cidr),
            **where,  # type: ignore[arg-type]
            nat_gateways=2 if nat_per_zone else 1,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="public",
                    subnet_type=ec2.SubnetType.PUBLIC,
                    cidr_mask=24,
                    map_public_ip_on_launch=False,
                ),
                ec2.SubnetConfiguration(
                    name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=19
                ),
                ec2.SubnetConfiguration(
                    name=LOAD_BALANCER_SUBNETS,
                    subnet_type=ec2.SubnetType.PRIVATE_ISOLATED,
                    cidr_mask=load_balancer_mask,
                ),
            ],
        )
        # One NAT gateway (in the first public subnet) serves both AZs' private subnets: the other
        # public subnet holds nothing, so it gets no route to the internet gateway.
        if not nat_per_zone:
            for subnet in self.vpc.public_subnets[1:]:
                subnet.node.try_remove_child("DefaultRoute")
        self.load_balancer_subnets = ec2.SubnetSelection(subnet_group_name=LOAD_BALANCER_SUBNETS)
        if endpoints:
            self._endpoints(name, cidr)
        flow_logs = logs.LogGroup(
            self,
            "FlowLogs",
            log_group_name=retained_name(self, f"/{name}/vpc-flow-logs"),
            retention=retention,
            encryption_key=key,
        )
        role, policy = managed_role(
            self,
            "FlowLogRole",
            role_name=f"{name}-flow-logs-{Stack.of(self).region}",
            service="vpc-flow-logs.amazonaws.com",
            description="VPC flow logs into their one log group",
            statements=[
                statement(
                    "FlowLogGroup",
                    ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                    [flow_logs.log_group_arn],
                )
            ],
        )
        log = self.vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs, role.without_policy_updates()),
        )
        log.node.add_dependency(policy)

    def _endpoints(self, name: str, cidr: str) -> None:
        private = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        for endpoint_id, gateway in GATEWAY_ENDPOINTS.items():
            self.vpc.add_gateway_endpoint(endpoint_id, service=gateway, subnets=[private])
        # One group for the interface endpoints: HTTPS from the VPC's own network (named literally, so
        # the rule is checkable at synth), nothing out.
        group = ec2.SecurityGroup(
            self,
            "EndpointSecurityGroup",
            security_group_name=f"{name}-vpc-endpoints",
            vpc=self.vpc,
            description="VPC interface endpoints: HTTPS from this VPC",
            allow_all_outbound=False,
        )
        group.add_ingress_rule(ec2.Peer.ipv4(cidr), ec2.Port.tcp(443), "HTTPS from this VPC")
        for endpoint_id, service in INTERFACE_ENDPOINTS.items():
            self.vpc.add_interface_endpoint(
                endpoint_id,
                service=service,
                subnets=private,
                private_dns_enabled=True,
                security_groups=[group],
                open=False,
            )
