"""The runner stack (home Region): container image, launch template, the instance role's permissions,
security group.

The global stack's workflow launches from this template by name. The instance runs in the home
Regional stack's private subnet (set in the template); it has no inbound rule and no SSH. The role
itself is the global stack's (`GlobalStack.runner_role`, by its fixed name): every Regional stack
gives it an EKS access entry, which needs the role to exist first.

Besides its job, evidence and run files, a job of kind `matrix` (`gco matrix run`/`resume`) reads
and writes the endpoint table, describes the Regional EKS clusters, reads them with the read-only
grant its access entry is bound to (`gco.reconcile.access.RUNNER_GRANT`), reads each Regional
stack's `InvokeUrl` output, calls the front doors (SigV4), and a resumed job reads an earlier run
directory back from `runs/`. Each of these is a statement below, on exactly those resources.
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

from gco.env import (
    AWS_REGION_ENV,
    EVIDENCE_BUCKET_ENV,
    HEARTBEAT_SECONDS_ENV,
    HOME_REGION_ENV,
    JOB_KEY_ENV,
    MODEL_TOKEN_KEY_ENV,
    MODEL_TOKEN_SECRET_ENV,
    TABLE_ENV,
)
from gco.front_door import regional_stack_name
from gpu_runner.runner import RUNNER_ID_VARIABLE, RUNS_PREFIX
from stacks.config import ECR_IMAGE, GcoConfig
from stacks.constructs.data import EVIDENCE_OBJECTS, IF_NONE_MATCH
from stacks.constructs.front_door import INFERENCE_PREFIX
from stacks.constructs.iam import statement
from stacks.constructs.reconciler import TABLE_ACTIONS
from stacks.constructs.runner_workflow import RUNNER_TAG, RUNNER_ZONES, RunnerNames
from stacks.regional import RegionalStack

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
# What a resumed job reads back: any earlier execution's run directory (gpu_runner.runner.download_dir).
RUN_OBJECTS = f"{RUNS_PREFIX}*"
# Every front door's invoke path: any stage (the API has one), any method, under /inference.
INVOKE_PATH = f"*/*{INFERENCE_PREFIX}/*"


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
    token_secret: str | None = None,
    token_key: str | None = None,
) -> str:
    """Pull and run the runner image once; whatever happens, the instance powers off (and terminates).

    The runner gets the host's Docker socket (and its group) so that it can run engine containers
    (gpu_runner/docker.py) beside itself, and sends a heartbeat every `heartbeat_seconds`. The model
    token's secret is passed by name only (the runner reads its value: gpu_runner/model_token.py).
    """
    token = f" -e {MODEL_TOKEN_SECRET_ENV}={token_secret}" if token_secret else ""
    token += f" -e {MODEL_TOKEN_KEY_ENV}={token_key}" if token_secret and token_key else ""
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
            f" -e {HEARTBEAT_SECONDS_ENV}={heartbeat_seconds}"
            f' -e {JOB_KEY_ENV}="$JOB_KEY" -e {EVIDENCE_BUCKET_ENV}={bucket} -e {AWS_REGION_ENV}={region}'
            f" -e {HOME_REGION_ENV}={home_region} -e {TABLE_ENV}={table}{token} {image_uri}",
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
        self.image_uri, self.repository_arn, registry = self._image(config)
        state_machine_arn = self.format_arn(
            service="states",
            resource="stateMachine",
            resource_name=names.workflow,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.role = iam.Role.from_role_name(self, "InstanceRole", names.instance_role)
        self.policy = iam.ManagedPolicy(
            self,
            "InstanceRolePolicy",
            managed_policy_name=names.instance_role,
            description="gco GPU runner: its job, evidence and run prefixes, task tokens, the endpoint "
            "table, and what a matrix job reads (clusters, Regional stack outputs, front doors)",
            statements=[
                *self._job_statements(config, bucket, bucket_key, state_machine_arn),
                *self._matrix_statements(config, bucket, home_api_id=regional.front_door.api.rest_api_id),
            ],
            roles=[self.role],
        )
        security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            security_group_name=names.launch_templates[0],
            vpc=vpc,
            allow_all_outbound=True,
            description="gco GPU runner: no inbound; outbound for images, models and AWS APIs",
        )
        # The home cluster's API endpoint is private (or allow-listed): admit the runner on 443 as the
        # reconciler is admitted, with the rules in this stack so the Regional stack knows nothing of it.
        for index, group in enumerate(regional.eks.cluster.connections.security_groups):
            ec2.CfnSecurityGroupIngress(
                self,
                f"ClusterApiFromRunner{index}",
                group_id=group.security_group_id,
                source_security_group_id=security_group.security_group_id,
                ip_protocol="tcp",
                from_port=443,
                to_port=443,
                description="GPU runner (a matrix job) to the home Region's Kubernetes API",
            )
        profile = iam.InstanceProfile(
            self, "InstanceProfile", role=self.role, instance_profile_name=names.instance_role
        )
        script = user_data(
            image_uri=self.image_uri,
            registry=registry,
            region=self.region,
            bucket=bucket.bucket_name,
            table=config.table_name,
            home_region=config.home_region,
            hours=config.runner.timeout_hours + 1,
            heartbeat_seconds=max(10, config.runner.heartbeat_seconds // 5),
            token_secret=config.runner.model_token_secret,
            token_key=config.runner.model_token_key,
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

    def _job_statements(
        self, config: GcoConfig, bucket: s3.IBucket, bucket_key: kms.IKey, state_machine_arn: str
    ) -> list[iam.PolicyStatement]:
        """Every job's: its job file, new evidence and run files, the keys, its task, the table, its image."""
        return [
            statement("ReadJobs", ["s3:GetObject"], [bucket.arn_for_objects("jobs/*")]),
            # New objects only (If-None-Match): the runner adds evidence and run files and can
            # replace none, its own run's or another's; the bucket denies an unconditional
            # evidence write to every caller (stacks/constructs/data.py EvidenceBucket). Run files only under
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
            # `gco matrix run` creates, reads, deletes (desired state) and lists (Scan) its endpoints.
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
                [self.repository_arn],
            ),
            statement("EcrLogin", ["ecr:GetAuthorizationToken"], ["*"]),
            *self._token_statements(config),
        ]

    def _token_statements(self, config: GcoConfig) -> list[iam.PolicyStatement]:
        """Read the model token's one secret (gpu_runner/model_token.py), where `cdk.json` names one.

        A secret's ARN ends in `-` and six random characters that Secrets Manager adds when it creates
        the secret, so the ARN by name is `<name>-??????` (the form IAM's Secrets Manager examples use:
        docs.aws.amazon.com/secretsmanager/latest/userguide/auth-and-access_iam-policies.html).
        """
        name = config.runner.model_token_secret
        if name is None:
            return []
        arn = self.format_arn(
            service="secretsmanager",
            region=config.home_region,
            resource="secret",
            resource_name=f"{name}-??????",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        return [statement("ReadModelToken", ["secretsmanager:GetSecretValue"], [arn])]

    def _matrix_statements(
        self, config: GcoConfig, bucket: s3.IBucket, *, home_api_id: str
    ) -> list[iam.PolicyStatement]:
        """What `gco matrix run`/`resume` needs beyond every job's, on exactly the gco resources."""
        clusters = [
            self.format_arn(
                service="eks", region=region, resource="cluster", resource_name=config.name(region)
            )
            for region in config.regions
        ]
        # A stack's ARN ends in a generated id (stack/<name>/<uuid>): the name is exact, the id is not
        # known before the stack exists.
        stacks = [
            self.format_arn(
                service="cloudformation",
                region=region,
                resource="stack",
                resource_name=f"{regional_stack_name(region, config.prefix)}/*",
            )
            for region in config.regions
        ]
        return [
            # Resume: list the bucket only under runs/ and read any run directory there back.
            statement(
                "ListRuns", ["s3:ListBucket"], [bucket.bucket_arn], StringLike={"s3:prefix": RUN_OBJECTS}
            ),
            statement("ReadRuns", ["s3:GetObject"], [bucket.arn_for_objects(RUN_OBJECTS)]),
            # The API server's endpoint and CA (gco.reconcile.eks.connect_eks); Kubernetes access is the
            # access entry's and RBAC's (stacks/constructs/cluster_access.py).
            statement("DescribeClusters", ["eks:DescribeCluster"], clusters),
            # Each Region's InvokeUrl output (gco.inference.regional_outputs.invoke_urls).
            statement("ReadRegionalOutputs", ["cloudformation:DescribeStacks"], stacks),
            statement("InvokeFrontDoors", ["execute-api:Invoke"], self._invoke_arns(config, home_api_id)),
        ]

    def _invoke_arns(self, config: GcoConfig, home_api_id: str) -> list[str]:
        """The home Region's front door by its API id; the other Regions' by Region and path only.

        A REST API's id is generated when it is created, and this stack can reference only the home
        Regional stack (CloudFormation exports do not cross Regions), so in another Region any API id
        of this account under `/inference/*` is allowed: only gco's front doors route that path, and
        each still requires SigV4 (execute-api:Invoke) for its one route. The stage is `*` as in the
        front door's own InvokePolicy (the API has one stage).
        """
        return [
            self.format_arn(
                service="execute-api",
                region=region,
                resource=home_api_id if region == config.home_region else "*",
                resource_name=INVOKE_PATH,
            )
            for region in config.regions
        ]

    def _image(self, config: GcoConfig) -> tuple[str, str, str]:
        """(image URI, its ECR repository's ARN, the registry to log in to): the prebuilt image of
        `runner.image_uri`, else one built from `gpu_runner/Dockerfile` by the local Docker."""
        prebuilt = ECR_IMAGE.match(config.runner.image_uri or "")
        if prebuilt:
            repository_arn = self.format_arn(
                service="ecr",
                region=prebuilt["region"],
                account=prebuilt["account"],
                resource="repository",
                resource_name=prebuilt["repository"],
            )
            registry = f"{prebuilt['account']}.dkr.ecr.{prebuilt['region']}.{self.url_suffix}"
            return prebuilt.group(0), repository_arn, registry
        image = ecr_assets.DockerImageAsset(
            self,
            "Image",
            directory=str(ROOT),
            file="gpu_runner/Dockerfile",
            exclude=IMAGE_CONTEXT,
            ignore_mode=IgnoreMode.DOCKER,
            platform=ecr_assets.Platform.LINUX_AMD64,
        )
        registry = f"{self.account}.dkr.ecr.{self.region}.{self.url_suffix}"
        return image.image_uri, image.repository.repository_arn, registry

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
