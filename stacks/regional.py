"""One Regional stack per Region: VPC, EKS with GPU and system node groups, the reconciler, its and
the GPU runner's cluster access (`cluster_access.py`), the load balancer controller (`ingress.py`) and
the front door (`front_door.py`)."""

from __future__ import annotations

from typing import cast

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from gco.model_sources import MODEL_SOURCES_ENV, NO_SOURCES, parse_prefixes
from gco.namespaces import SYSTEM_NAMESPACE
from gco.reconcile.access import RECONCILER_GRANT
from gco.reconcile.environment import ReconcilerEnvironment
from gco.reconcile.render_proxy import target_group_binding
from stacks.bundling import lambda_code
from stacks.config import GcoConfig, NodeGroupConfig
from stacks.constructs.cluster_access import ClusterAccess
from stacks.constructs.cluster_addons import ClusterAddons, kubectl_provider_options
from stacks.constructs.data import stream_identity
from stacks.constructs.front_door import FrontDoor
from stacks.constructs.gpu_nodes import add_node_groups, priority_expander
from stacks.constructs.iam import managed_role, statement
from stacks.constructs.ingress import LoadBalancerController
from stacks.constructs.keys import RETENTION, stack_key
from stacks.constructs.model_access import ModelAccess
from stacks.constructs.operators import OperatorAccess, endpoint_access
from stacks.constructs.reconciler import Reconciler, dead_letter_queue
from stacks.constructs.retained import retained_name
from stacks.constructs.runner_workflow import RunnerNames
from stacks.constructs.stream_lookup import StreamArnLookup

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
    """Two AZs, public subnets for NAT only, private subnets for nodes, Lambdas and the runner, flow
    logs; one NAT gateway or one per zone; VPC endpoints for ECR, S3, STS, DynamoDB and Logs."""

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
    ) -> None:
        super().__init__(scope, construct_id)
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            vpc_name=name,
            ip_addresses=ec2.IpAddresses.cidr(cidr),
            max_azs=2,
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
            ],
        )
        # One NAT gateway (in the first public subnet) serves both AZs' private subnets: the other
        # public subnet holds nothing, so it gets no route to the internet gateway.
        if not nat_per_zone:
            for subnet in self.vpc.public_subnets[1:]:
                subnet.node.try_remove_child("DefaultRoute")
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


class RegionalStack(Stack):
    """The Region's cluster and reconciler, triggered by the Region's copy of the table's stream."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GcoConfig, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        region = self.region
        retention = RETENTION[config.log_retention_days]
        self.key = stack_key(
            self,
            "Key",
            alias=f"alias/{config.name(region)}",
            description=f"{config.prefix} {region}: logs, queues, topics, secrets",
        )
        self.network = Network(
            self,
            "Network",
            name=config.name(region),
            cidr=config.vpc_cidr(region),
            key=self.key,
            retention=retention,
            nat_per_zone=config.network.nat_per_zone,
            endpoints=config.network.vpc_endpoints,
        )
        cluster_name = config.name(region)
        self.eks = GpuCluster(
            self,
            "Eks",
            name=cluster_name,
            version=config.kubernetes_version,
            vpc=self.network.vpc,
            key=self.key,
            gpu=config.gpu_nodes,
            system=config.system_nodes,
            endpoint_access=endpoint_access(config.operators),
        )
        self.operators = OperatorAccess(self, "Operators", cluster=self.eks.cluster, config=config.operators)
        self.addons = ClusterAddons(
            self,
            "Addons",
            cluster=self.eks.cluster_interface,
            cluster_name=cluster_name,
            kubernetes_version=config.kubernetes_version,
            scaling=config.has_keda(region),
            system_nodes=self.eks.system,
            expander_priorities=priority_expander(cluster_name, config.gpu_nodes)
            if config.gpu_nodes.capacity_type == "both"
            else None,
        )
        name = config.name("reconciler", region)
        security_group = ec2.SecurityGroup(
            self,
            "ReconcilerSecurityGroup",
            security_group_name=name,
            vpc=self.network.vpc,
            description=f"{name}: egress to the EKS API and AWS APIs",
        )
        dlq = dead_letter_queue(self, "DeadLetters", name=name, key=self.key)
        lookup = StreamArnLookup(
            self,
            "StreamArn",
            name=config.name("stream-arn", region),
            table_name=config.table_name,
            stream_identity=stream_identity(config.replica_regions),
            vpc=self.network.vpc,
            key=self.key,
            dlq=dlq,
            security_group=security_group,
            log_retention=retention,
        )
        self.reconciler = Reconciler(
            self,
            "Reconciler",
            name=name,
            code=lambda_code(install_dependencies=config.bundle_dependencies),
            environment=ReconcilerEnvironment(
                cluster_name=cluster_name,
                region=region,
                table_name=config.table_name,
                home_region=config.home_region,
                proxy=config.proxy,
                addons=frozenset(self.addons.present),
                gpu_instance_types=tuple(config.gpu_nodes.instance_types),
                model_sources=tuple(config.model_sources),
                endpoint_secrets=tuple(config.endpoint_secrets),
            ),
            stream_arn=lookup.stream_arn,
            cluster_arn=self.eks.cluster.cluster_arn,
            vpc=self.network.vpc,
            security_group=security_group,
            dlq=dlq,
            key=self.key,
            sweep_minutes=config.sweep_minutes,
            log_retention=retention,
            alarm_emails=tuple(config.alarms.emails),
            alarm_topic_arns=tuple(config.alarms.topic_arns),
        )
        self.eks.cluster.connections.allow_from(
            security_group, ec2.Port.tcp(443), "reconciler to the Kubernetes API"
        )
        # The runner's role by its fixed name (IAM is global; the role is the global stack's).
        runner_role_arn = self.format_arn(
            service="iam", region="", resource="role", resource_name=RunnerNames.of(config).instance_role
        )
        self.access = ClusterAccess(
            self,
            "ReconcilerAccess",
            cluster=self.eks.cluster_interface,
            role_arn=self.reconciler.role.role_arn,
            runner_role_arn=runner_role_arn,
        )
        self.front_door = FrontDoor(
            self,
            "FrontDoor",
            name=config.name("inference", region),
            vpc=self.network.vpc,
            pod_security_group=self.eks.cluster.cluster_security_group,
            key=self.key,
            log_retention=retention,
        )
        self.ingress = LoadBalancerController(
            self,
            "LoadBalancerController",
            name=config.name("lb-controller"),
            cluster=self.eks.cluster_interface,
            vpc_id=self.network.vpc.vpc_id,
            target_group_arn=self.front_door.target_group.target_group_arn,
            pod_identity_agent=self.addons.pod_identity_agent,
            system_nodes=self.eks.system,
        )
        self.model_access = ModelAccess(
            self,
            "ModelAccess",
            name=config.name("model-reader"),
            cluster=self.eks.cluster_interface,
            namespaces=[ns for ns in RECONCILER_GRANT.namespaces if ns != SYSTEM_NAMESPACE],
            sources=parse_prefixes(config.model_sources),
            kms_keys=config.model_kms_keys,
            pod_identity_agent=self.addons.pod_identity_agent,
        )
        CfnOutput(
            self,
            "ModelSources",
            key="ModelSources",
            value=",".join(config.model_sources) or NO_SOURCES,
            description=f"S3 prefixes endpoint pods may read models from (set {MODEL_SOURCES_ENV} to this)",
        )
        binding = self.eks.cluster.add_manifest(
            "ProxyTargetGroupBinding", target_group_binding(self.front_door.target_group.target_group_arn)
        )
        binding.node.add_dependency(self.ingress.chart, self.access.manifest)
