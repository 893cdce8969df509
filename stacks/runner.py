"""The runner stack (home Region): container image, launch template, instance role, security group.

The global stack's workflow launches from this template by name. The instance runs in the home
Regional stack's private subnet (set in the template); it has no inbound rule and no SSH.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import ArnFormat, IgnoreMode, Stack, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from gco.env import HOME_REGION_ENV, TABLE_ENV
from gpu_runner.runner import RUNNER_ID_VARIABLE, RUNS_PREFIX
from stacks.config import GcoConfig
from stacks.data import EVIDENCE_OBJECTS, IF_NONE_MATCH
from stacks.iam import managed_role, statement
from stacks.reconciler import TABLE_ACTIONS
from stacks.regional import RegionalStack
from stacks.runner_workflow import RUNNER_TAG, RUNNER_ZONES, RunnerNames

ROOT = Path(__file__).resolve().parent.parent
GPU_AMI_PARAMETER = (
    "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-amazon-linux-2023/latest/ami-id"
)
# Docker-ignore semantics: only what the Dockerfile copies enters the build context.
IMAGE_CONTEXT = ["*", "!pyproject.toml", "!README.md", "!gco", "!gpu_runner", "**/__pycache__", "**/*.pyc"]
IMDS = "http://169.254.169.254/latest"
# What the instance role may create under runs/: any execution's folder, but only its own id's
# subfolder (gpu_runner.runner.run_prefix), the policy variable resolving to the caller's aws:userid.
OWN_RUN_OBJECTS = f"{RUNS_PREFIX}*/{RUNNER_ID_VARIABLE}/*"


def user_data(
    *,
    image_uri: str,
    registry: str,
    region: str,
    bucket: str,
    table: str,
    home_region: str,
    hours: int,
    heartbeat_seconds: int,
) -> str:
    """Pull and run the runner image once; whatever happens, the instance powers off (and terminates).

    The runner gets the host's Docker socket (and its group) so that it can run engine containers
    (gpu_runner/docker.py) beside itself, and sends a heartbeat every `heartbeat_seconds`.
    """
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
            " -v /var/run/docker.sock:/var/run/docker.sock --group-add $(stat -c %g /var/run/docker.sock)"
            f" -e GCO_HEARTBEAT_SECONDS={heartbeat_seconds}"
            f' -e GCO_JOB_KEY="$JOB_KEY" -e GCO_EVIDENCE_BUCKET={bucket} -e AWS_REGION={region}'
            f" -e {HOME_REGION_ENV}={home_region} -e {TABLE_ENV}={table} {image_uri}",
        ]
    )


class RunnerStack(Stack):
    """What the workflow launches: one GPU instance that runs one job, then terminates itself."""

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
        names = RunnerNames.of(config)
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
            resource_name=names.workflow,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.role, self.policy = managed_role(
            self,
            "InstanceRole",
            role_name=names.instance_role,
            service="ec2.amazonaws.com",
            description="gco GPU runner: its job, evidence and run prefixes, task tokens, the endpoint table",
            statements=[
                statement("ReadJobs", ["s3:GetObject"], [bucket.arn_for_objects("jobs/*")]),
                # New objects only (If-None-Match): the runner adds evidence and run files and can
                # replace none, its own run's or another's; the bucket denies an unconditional
                # evidence write to every caller (stacks/data.py EvidenceBucket). Run files only under
                # the runner's own id (`aws:userid`, role-id:instance-id: one instance per execution);
                # evidence keys are content digests, checked on every read, so a runner can add a
                # record but never one under another record's id.
                statement(
                    "CreateEvidenceAndOwnRunObjects",
                    ["s3:PutObject"],
                    [bucket.arn_for_objects(EVIDENCE_OBJECTS), bucket.arn_for_objects(OWN_RUN_OBJECTS)],
                    Null={IF_NONE_MATCH: "false"},
                ),
                statement("ReadEvidence", ["s3:GetObject"], [bucket.arn_for_objects(EVIDENCE_OBJECTS)]),
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
            security_group_name=names.launch_templates[0],
            vpc=vpc,
            allow_all_outbound=True,
            description="gco GPU runner: no inbound; outbound for images, models and AWS APIs",
        )
        profile = iam.InstanceProfile(
            self, "InstanceProfile", role=self.role, instance_profile_name=names.instance_role
        )
        script = user_data(
            image_uri=self.image.image_uri,
            registry=f"{self.account}.dkr.ecr.{self.region}.{self.url_suffix}",
            region=self.region,
            bucket=bucket.bucket_name,
            table=config.table_name,
            home_region=config.home_region,
            hours=config.runner.timeout_hours + 1,
            heartbeat_seconds=max(10, config.runner.heartbeat_seconds // 5),
        )
        subnets = vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnets
        if len(subnets) < RUNNER_ZONES:
            raise ValueError(
                f"the runner launches in {RUNNER_ZONES} zones; the VPC has {len(subnets)} private subnets"
            )
        # One template per zone, each holding its subnet (RunInstances names only the template), so the
        # workflow's definition needs no id from this stack and falls back from zone to zone.
        self.launch_templates = [
            self._launch_template(
                "LaunchTemplate" if zone == 1 else f"LaunchTemplate{zone}",
                name=template_name,
                config=config,
                profile=profile,
                script=script,
                subnet=subnet,
                security_group=security_group,
                workflow=names.workflow,
            )
            for zone, (template_name, subnet) in enumerate(
                zip(names.launch_templates, subnets, strict=False), start=1
            )
        ]
        self.launch_template = self.launch_templates[0]

    def _launch_template(
        self,
        construct_id: str,
        *,
        name: str,
        config: GcoConfig,
        profile: iam.IInstanceProfile,
        script: str,
        subnet: ec2.ISubnet,
        security_group: ec2.ISecurityGroup,
        workflow: str,
    ) -> ec2.LaunchTemplate:
        template = ec2.LaunchTemplate(
            self,
            construct_id,
            launch_template_name=name,
            instance_type=ec2.InstanceType(config.runner.instance_type),
            machine_image=ec2.MachineImage.from_ssm_parameter(GPU_AMI_PARAMETER),
            instance_profile=profile,
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
            user_data=ec2.UserData.custom(script),
        )
        # Groups go on the interface: EC2 refuses both.
        cfn = template.node.default_child
        assert isinstance(cfn, ec2.CfnLaunchTemplate)
        cfn.add_property_override(
            "LaunchTemplateData.NetworkInterfaces",
            [
                {
                    "DeviceIndex": 0,
                    "SubnetId": subnet.subnet_id,
                    "Groups": [security_group.security_group_id],
                    "AssociatePublicIpAddress": False,
                    "DeleteOnTermination": True,
                }
            ],
        )
        Tags.of(template).add(RUNNER_TAG, workflow)
        return template
