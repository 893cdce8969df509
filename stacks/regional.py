"""One Regional stack per Region: the network (`constructs/network.py`), EKS with GPU and system node
groups (`constructs/gpu_cluster.py`), the reconciler, its and the GPU runner's cluster access
(`constructs/cluster_access.py`), the load balancer controller (`constructs/ingress.py`) and the
front door (`constructs/front_door.py`)."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from constructs import Construct

from gco.endpoints.namespaces import SYSTEM_NAMESPACE
from gco.front_door import FRONT_DOOR_PART, GLOBAL_API_PART
from gco.reconcile.access import RECONCILER_GRANT
from gco.reconcile.environment import ReconcilerEnvironment
from gco.reconcile.model_sources import MODEL_SOURCES_ENV, NO_SOURCES, parse_prefixes
from gco.reconcile.proxy.proxy_settings import ProxySettings
from gco.reconcile.proxy.render_proxy import target_group_binding
from gco.reconcile.proxy_forwarding import Forwarding
from stacks.bundling import REGIONAL, lambda_code
from stacks.config import GcoConfig
from stacks.constructs.api_account import ApiGatewayAccount
from stacks.constructs.cluster_access import ClusterAccess
from stacks.constructs.cluster_addons import ClusterAddons
from stacks.constructs.dashboards import RegionalDashboard
from stacks.constructs.data import stream_identity
from stacks.constructs.front_door import STAGE, FrontDoor
from stacks.constructs.global_front_door import GlobalFrontDoor
from stacks.constructs.gpu_cluster import GpuCluster
from stacks.constructs.gpu_nodes import priority_expander
from stacks.constructs.ingress import LoadBalancerController
from stacks.constructs.keys import RETENTION, stack_key
from stacks.constructs.model_access import ModelAccess
from stacks.constructs.network import LOAD_BALANCER_SUBNETS, Network
from stacks.constructs.observability import ContainerInsights
from stacks.constructs.operators import OperatorAccess, endpoint_access
from stacks.constructs.reconciler import Reconciler, dead_letter_queue
from stacks.constructs.runner_workflow import RunnerNames
from stacks.constructs.stream_lookup import StreamArnLookup


def proxy_settings(config: GcoConfig, region: str) -> ProxySettings:
    """The Region's proxy settings: cdk.json's, and with a global address, the Region's forwarding."""
    address = config.global_address
    if address is None:
        return config.proxy
    forwarding = Forwarding(region=region, regions=tuple(config.regions), domain=address.domain_name)
    return config.proxy.model_copy(update={"forwarding": forwarding})


class RegionalStack(Stack):
    """The Region's cluster and reconciler, triggered by the Region's copy of the table's stream."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: GcoConfig,
        table_key: kms.IKey | None = None,
        **kwargs: object,
    ) -> None:
        """`table_key`: this Region's key of the endpoint and keys tables (the global stack's in the
        home Region, the keys stack's elsewhere); needed with `global_address` only."""
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
            zones=config.network.availability_zones.get(region),
            load_balancer_mask=config.network.load_balancer_subnet_mask,
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
        # GPU utilisation to CloudWatch (the dashboards' per-endpoint and per-Region GPU widgets).
        self.container_insights = ContainerInsights(
            self,
            "ContainerInsights",
            cluster=self.eks.cluster_interface,
            cluster_name=cluster_name,
            pod_identity_agent=self.addons.pod_identity_agent,
            system_nodes=self.eks.system,
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
        code = lambda_code(bundle=REGIONAL, install_dependencies=config.bundle_dependencies)
        self.reconciler = Reconciler(
            self,
            "Reconciler",
            name=name,
            code=code,
            environment=ReconcilerEnvironment(
                cluster_name=cluster_name,
                region=region,
                table_name=config.table_name,
                home_region=config.home_region,
                proxy=proxy_settings(config, region),
                addons=frozenset(self.addons.present),
                gpu_instance_types=tuple(config.gpu_nodes.instance_types),
                model_sources=tuple(config.model_sources),
                endpoint_secrets=tuple(config.endpoint_secrets),
                # The front door's ALB and VPC link have subnets of their own; the cluster's interfaces,
                # where the API server's pod proxy connects from, are in the private subnets
                # (stacks/constructs/network.py, gco/reconcile/render_network.py).
                load_balancer_cidrs=tuple(
                    subnet.ipv4_cidr_block
                    for subnet in self.network.vpc.select_subnets(
                        subnet_group_name=LOAD_BALANCER_SUBNETS
                    ).subnets
                ),
                control_plane_cidrs=tuple(
                    subnet.ipv4_cidr_block for subnet in self.network.vpc.private_subnets
                ),
                gpu_disk_gib=config.gpu_nodes.model_root_gib,  # model storage where no instance store
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
            secret_kms_keys=tuple(config.endpoint_secret_kms_keys),
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
            name=config.name(FRONT_DOOR_PART, region),
            vpc=self.network.vpc,
            pod_security_group=self.eks.cluster.cluster_security_group,
            key=self.key,
            log_retention=retention,
        )
        # The stage's access logs need the account's CloudWatch Logs role in this Region: set here
        # unless the config says the account has one (stacks/constructs/api_account.py).
        self.api_account: ApiGatewayAccount | None = None
        if config.api_gateway_account == "create":
            self.api_account = ApiGatewayAccount(self, "ApiGatewayAccount", prefix=config.prefix)
            self.front_door.api.deployment_stage.node.add_dependency(self.api_account.account)
        self.global_front_door = (
            GlobalFrontDoor(
                self,
                "GlobalFrontDoor",
                name=config.name(GLOBAL_API_PART, region),
                address=config.global_address,
                order=config.global_address.order(config.regions),
                front_door=self.front_door,
                vpc=self.network.vpc,
                code=code,
                endpoints_table=config.table_name,
                table_key=table_key,
                key=self.key,
                log_retention=retention,
                alarm_targets=self.reconciler.alarm_targets,
            )
            if config.global_address is not None and table_key is not None
            else None
        )
        if self.api_account is not None:
            # The global API's stage writes access logs too: the same account setting comes first.
            for api in [self.global_front_door.api] if self.global_front_door is not None else []:
                api.deployment_stage.node.add_dependency(self.api_account.account)
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
        self.dashboard = RegionalDashboard(
            self,
            "Dashboard",
            name=config.name(region),
            api_name=config.name(FRONT_DOOR_PART, region),
            stage=STAGE,
            access_log_group=self.front_door.access_logs.log_group_name,
            cluster_name=cluster_name,
            sweep_minutes=config.sweep_minutes,
            alarm_targets=self.reconciler.alarm_targets,
            global_api_name=(
                self.global_front_door.api.rest_api_name if self.global_front_door is not None else None
            ),
        )
        binding = self.eks.cluster.add_manifest(
            "ProxyTargetGroupBinding", target_group_binding(self.front_door.target_group.target_group_arn)
        )
        binding.node.add_dependency(self.ingress.chart, self.access.manifest)
