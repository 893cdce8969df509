"""The global stack (home Region) and the per-Region key stacks its table replicas need.

Besides the table and the evidence bucket, it holds the GPU runner workflow and its cleanup, and the
runner's instance role itself (its permissions are the runner stack's): each Regional stack gives
that role an EKS access entry, and EKS resolves the principal when the entry is created and keeps
its unique role id, so the role must exist before the Regional stacks and outlive the runner stack
("if you ... recreate the IAM principal, even if it has the same ARN, the access entry won't work",
EKS API reference, AccessEntry.principalArn).
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from gco.admission.policy import parameter_name
from gco.front_door import FRONT_DOOR_PART, GLOBAL_API_PART
from stacks.bundling import ROLLOUT, lambda_code
from stacks.config import GcoConfig
from stacks.constructs.dashboards import GlobalDashboard
from stacks.constructs.data import EndpointTable, EvidenceBucket
from stacks.constructs.front_door import STAGE
from stacks.constructs.keys import RETENTION, replica_key_alias, stack_key, table_key
from stacks.constructs.keys_table import KeysTable
from stacks.constructs.rollout_workflow import RolloutWorkflow
from stacks.constructs.runner_cleanup import RunnerCleanup
from stacks.constructs.runner_workflow import RunnerNames, RunnerWorkflow


class KeysStack(Stack):
    """A Regional Region's table key, deployed before the global stack so its replica can use it."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GcoConfig, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.key = table_key(
            self,
            "TableKey",
            prefix=config.prefix,
            description=f"{config.prefix}: endpoint table replica in {self.region}",
        )


class GlobalStack(Stack):
    """The endpoint table (and its replicas), the evidence bucket, the GPU runner workflow and the rollout
    state machine (`stacks/constructs/rollout_workflow.py`)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GcoConfig, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.table_key = table_key(
            self,
            "TableKey",
            prefix=config.prefix,
            description=f"{config.prefix}: endpoint table and evidence",
        )
        self.key = stack_key(
            self,
            "Key",
            alias=f"alias/{config.name('global')}",
            description=f"{config.prefix} global: logs and queues",
        )
        replica_key_arns = {
            region: self.format_arn(service="kms", region=region, resource=replica_key_alias(config.prefix))
            for region in config.replica_regions
        }
        self.endpoints = EndpointTable(
            self,
            "Endpoints",
            table_name=config.table_name,
            key=self.table_key,
            replica_regions=config.replica_regions,
            replica_key_arns=replica_key_arns,
        )
        # The bearer keys of the global address (docs/global.md), replicated like the endpoint table.
        self.keys_table = (
            KeysTable(
                self,
                "ApiKeys",
                table_name=config.global_address.keys_table_name,
                key=self.table_key,
                replica_regions=config.replica_regions,
                replica_key_arns=replica_key_arns,
            )
            if config.global_address is not None
            else None
        )
        self.evidence = EvidenceBucket(
            self,
            "Evidence",
            name=config.name("evidence"),
            key=self.table_key,
            retention_days=config.evidence_retention_days,
        )
        # The deployment's validation policy and where its evidence is, for the CLI to read by name
        # (`gco.admission.policy`: one ssm:GetParameter in the home Region).
        self.validation_policy = ssm.StringParameter(
            self,
            "ValidationPolicy",
            parameter_name=parameter_name(config.prefix),
            description=f"{config.prefix}: validation policy (off, warn, enforce) and evidence bucket",
            string_value=self.to_json_string(
                {"policy": config.validation_policy, "evidence_bucket": self.evidence.bucket.bucket_name}
            ),
        )
        names = RunnerNames.of(config)
        retention = RETENTION[config.log_retention_days]
        self.runner_role = iam.Role(
            self,
            "RunnerInstanceRole",
            role_name=names.instance_role,
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="gco GPU runner instances; its permissions are the runner stack's managed policy",
        )
        self.runner_workflow = RunnerWorkflow(
            self,
            "RunnerWorkflow",
            names=names,
            instance_types=config.runner.instance_types,
            bucket=self.evidence.bucket,
            key=self.table_key,
            log_key=self.key,
            heartbeat=Duration.seconds(config.runner.heartbeat_seconds),
            boot=Duration.seconds(config.runner.boot_seconds),
            timeout=Duration.hours(config.runner.timeout_hours),
            log_retention=retention,
        )
        self.runner_cleanup = RunnerCleanup(
            self,
            "RunnerCleanup",
            name=names.cleanup,
            workflow_name=names.workflow,
            workflow_arn=self.runner_workflow.state_machine.state_machine_arn,
            key=self.key,
            log_retention=retention,
        )
        self.dashboard = GlobalDashboard(
            self,
            "Dashboard",
            name=config.name("regions"),
            api_names={region: config.name(FRONT_DOOR_PART, region) for region in config.regions},
            # Each Regional stack names its cluster so (stacks/regional.py).
            cluster_names={region: config.name(region) for region in config.regions},
            stage=STAGE,
            # With a global address, each Regional stack names its global API so (stacks/regional.py).
            global_api_names=(
                {region: config.name(GLOBAL_API_PART, region) for region in config.regions}
                if config.global_address is not None
                else None
            ),
        )
        self.rollout = RolloutWorkflow(
            self,
            "Rollout",
            name=config.name("rollout"),
            prefix=config.prefix,
            regions=config.regions,
            table=self.endpoints.table,
            table_key=self.table_key,
            bucket=self.evidence.bucket,
            key=self.key,
            code=lambda_code(bundle=ROLLOUT, install_dependencies=config.bundle_dependencies),
            log_retention=retention,
            validation_policy=self.validation_policy,
        )
