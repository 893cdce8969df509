"""The runner stack (home Region): container image, launch template, instance role, state machine.

The instance runs in the home Regional stack's private subnets; it has no inbound rule and no SSH.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import ArnFormat, Duration, IgnoreMode, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.config import GcoConfig
from stacks.iam import managed_role, statement
from stacks.reconciler import TABLE_ACTIONS
from stacks.regional import RETENTION, RegionalStack
from stacks.runner_cleanup import RunnerCleanup
from stacks.runner_workflow import RunnerWorkflow

ROOT = Path(__file__).resolve().parent.parent
GPU_AMI_PARAMETER = (
    "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-amazon-linux-2023/latest/ami-id"
)
# Docker-ignore semantics: only what the Dockerfile copies enters the build context.
IMAGE_CONTEXT = ["*", "!pyproject.toml", "!README.md", "!gco", "!gpu_runner", "**/__pycache__", "**/*.pyc"]
IMDS = "http://169.254.169.254/latest"


def user_data(
    *, image_uri: str, registry: str, region: str, bucket: str, table: str, home_region: str, hours: int
) -> str:
    """Pull and run the runner image once; whatever happens, the instance powers off (and terminates)."""
    return "\n".join(
        [
            "#!/bin/bash",
            "set -uo pipefail",
            f"shutdown -h +{hours * 60}",
            "trap 'shutdown -h now' EXIT",
            f'TOKEN=$(curl -sf -X PUT "{IMDS}/api/token" -H "X-aws-ec2-metadata-token-ttl-seconds: 300")',
            'AUTH="X-aws-ec2-metadata-token: $TOKEN"',
            f'JOB_KEY=$(curl -sf -H "$AUTH" "{IMDS}/meta-data/tags/instance/gco-job-key")',
            f"aws ecr get-login-password --region {region}"
            f" | docker login --username AWS --password-stdin {registry}",
            f"docker pull {image_uri}",
            "docker run --rm --gpus all --network host --ipc host"
            f' -e GCO_JOB_KEY="$JOB_KEY" -e GCO_EVIDENCE_BUCKET={bucket} -e AWS_REGION={region}'
            f" -e DYNAMODB_REGION={home_region} -e INFERENCE_ENDPOINTS_TABLE_NAME={table} {image_uri}",
        ]
    )


class RunnerStack(Stack):
    """Everything the state machine needs to run one job on one GPU instance and clean up."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: GcoConfig,
        bucket: s3.IBucket,
        bucket_key: kms.IKey,
        regional: RegionalStack,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        vpc = regional.network.vpc
        workflow_name = config.name("gpu-runner")
        self.image = ecr_assets.DockerImageAsset(
            self,
            "Image",
            directory=str(ROOT),
            file="gpu_runner/Dockerfile",
            exclude=IMAGE_CONTEXT,
            ignore_mode=IgnoreMode.DOCKER,
            platform=ecr_assets.Platform.LINUX_AMD64,
        )
        state_machine_arn = self.format_arn(
            service="states",
            resource="stateMachine",
            resource_name=workflow_name,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.role, self.policy = managed_role(
            self,
            "InstanceRole",
            role_name=config.name("runner", self.region),
            service="ec2.amazonaws.com",
            description="gco GPU runner: its job, evidence and run prefixes, task tokens, the endpoint table",
            statements=[
                statement("ReadJobs", ["s3:GetObject"], [bucket.arn_for_objects("jobs/*")]),
                statement(
                    "WriteEvidenceAndRuns",
                    ["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"],
                    [bucket.arn_for_objects("evidence/*"), bucket.arn_for_objects("runs/*")],
                ),
                statement("BucketAndTableKey", ["kms:Decrypt", "kms:GenerateDataKey"], [bucket_key.key_arn]),
                statement(
                    "AnswerOwnTasks",
                    ["states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"],
                    [state_machine_arn],
                ),
                statement(
                    "EndpointTable",
                    TABLE_ACTIONS,
                    [
                        self.format_arn(
                            service="dynamodb",
                            region=config.home_region,
                            resource="table",
                            resource_name=config.table_name,
                        )
                    ],
                ),
                statement(
                    "PullRunnerImage",
                    ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                    [self.image.repository.repository_arn],
                ),
                statement("EcrLogin", ["ecr:GetAuthorizationToken"], ["*"]),
            ],
        )
        security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            allow_all_outbound=True,
            description="gco GPU runner: no inbound; outbound for images, models and AWS APIs",
        )
        self.launch_template = ec2.LaunchTemplate(
            self,
            "LaunchTemplate",
            launch_template_name=config.name("runner"),
            instance_type=ec2.InstanceType(config.runner.instance_type),
            machine_image=ec2.MachineImage.from_ssm_parameter(GPU_AMI_PARAMETER),
            role=self.role,
            security_group=security_group,
            require_imdsv2=True,
            http_put_response_hop_limit=2,
            instance_metadata_tags=True,
            instance_initiated_shutdown_behavior=ec2.InstanceInitiatedShutdownBehavior.TERMINATE,
            detailed_monitoring=True,
            block_devices=[
                ec2.BlockDevice(
                    device_name="/dev/xvda",
                    volume=ec2.BlockDeviceVolume.ebs(
                        config.runner.volume_size_gib,
                        encrypted=True,
                        volume_type=ec2.EbsDeviceVolumeType.GP3,
                        delete_on_termination=True,
                    ),
                )
            ],
            user_data=ec2.UserData.custom(
                user_data(
                    image_uri=self.image.image_uri,
                    registry=f"{self.account}.dkr.ecr.{self.region}.{self.url_suffix}",
                    region=self.region,
                    bucket=bucket.bucket_name,
                    table=config.table_name,
                    home_region=config.home_region,
                    hours=config.runner.timeout_hours + 1,
                )
            ),
        )
        self.workflow = RunnerWorkflow(
            self,
            "Workflow",
            name=workflow_name,
            launch_template=self.launch_template,
            instance_role=self.role,
            security_group=security_group,
            subnets=vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnets,
            bucket=bucket,
            key=bucket_key,
            log_key=regional.key,
            heartbeat=Duration.seconds(config.runner.heartbeat_seconds),
            timeout=Duration.hours(config.runner.timeout_hours),
            log_retention=RETENTION[config.log_retention_days],
        )
        self.cleanup = RunnerCleanup(
            self,
            "Cleanup",
            name=config.name("gpu-runner-cleanup"),
            workflow_name=workflow_name,
            key=regional.key,
            log_retention=RETENTION[config.log_retention_days],
        )
