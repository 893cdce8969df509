"""Every cdk-nag suppression: one resource path, one rule, one specific reason.

Counted by `benchmarks/synth.py`. Wildcard-resource findings (AwsSolutions-IAM5) are suppressed
only for the exact resource strings listed in `applies_to`, so a new wildcard still fails the nag test.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo

from gco.front_door import regional_stack_name
from stacks.nag.addon_suppressions import addon_suppressions
from stacks.nag.suppression import Suppression, each_pack

EC2_ARN = "Resource::arn:<AWS::Partition>:ec2:{region}:<AWS::AccountId>:{kind}/*"
RUN_INSTANCES_KINDS = (
    "launch-template",
    "subnet",
    "security-group",
    "instance",
    "volume",
    "network-interface",
)


def _bucket(prefix: str) -> RegexAppliesTo:
    return RegexAppliesTo(regex=rf"/^Resource::<EvidenceBucket[0-9A-F]{{8}}\.Arn>\/{prefix}\/\*$/g")


def global_suppressions(stack: Stack) -> list[Suppression]:
    root, region = f"/{stack.stack_name}", stack.region
    logs, evidence = f"{root}/Evidence/AccessLogs/Resource", f"{root}/Evidence/Bucket/Resource"
    return [
        *each_pack(
            logs,
            "S3DefaultEncryptionKMS",
            "S3 server access logs can only be delivered to a bucket encrypted with SSE-S3, not SSE-KMS",
        ),
        *each_pack(
            logs,
            "S3BucketReplicationEnabled",
            "access logs of the evidence bucket; versioned and retained in place, a copy adds no evidence",
        ),
        *each_pack(
            evidence,
            "S3BucketReplicationEnabled",
            "evidence records are content-addressed, written once and also kept by the run's operator; "
            "cross-Region replication is left to the deployer's backup policy",
        ),
        Suppression(
            f"{root}/RunnerWorkflow/RolePolicy/Resource",
            "AwsSolutions-IAM5",
            "RunInstances creates instances, volumes and ENIs whose ids are unknown before launch; the "
            "template, subnet and security group are matched by this deployment's tags (the runner stack "
            "deploys after this one); terminate only tagged runners; log delivery and X-Ray take no resource",
            (
                "Resource::*",
                _bucket("jobs"),
                *(EC2_ARN.format(region=region, kind=k) for k in RUN_INSTANCES_KINDS),
                f"Resource::arn:<AWS::Partition>:ec2:{region}::image/*",
            ),
        ),
        Suppression(
            f"{root}/RunnerCleanup/RolePolicy/Resource",
            "AwsSolutions-IAM5",
            "ec2:DescribeInstances takes no resource; terminate only instances tagged as this workflow's; "
            "log delivery and X-Ray take no resource",
            ("Resource::*", EC2_ARN.format(region=region, kind="instance")),
        ),
        Suppression(
            f"{root}/RunnerCleanup/DeadLetters/Resource",
            "AwsSolutions-SQS3",
            "this queue is the dead-letter queue of the cleanup rule's target; it has none itself",
        ),
        Suppression(
            f"{root}/RunnerCleanup/DeadLetters/Resource",
            "Serverless-SQSRedrivePolicy",
            "this queue is the dead-letter queue of the cleanup rule's target; it has none itself",
        ),
    ]


def regional_suppressions(stack: Stack, home_region: str) -> list[Suppression]:
    root, region = f"/{stack.stack_name}", stack.region
    cluster = f"{root}/Eks/Cluster"
    return [
        *each_pack(
            f"{root}/Network/Vpc/Resource",
            "VPCDefaultSecurityGroupClosed",
            "the default security group is never attached: every ENI gets its own group; closing it "
            "needs a custom-resource Lambda that would bring its own findings",
        ),
        *each_pack(
            f"{root}/Network/Vpc/publicSubnet1/DefaultRoute",
            "VPCNoUnrestrictedRouteToIGW",
            "the one public subnet holds only the NAT gateway, which needs this route for private egress",
        ),
        Suppression(
            f"{cluster}/Role/Resource",
            "AwsSolutions-IAM4",
            "AmazonEKSClusterPolicy is the policy EKS documents for the cluster service role",
            ("Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKSClusterPolicy",),
        ),
        *[
            Suppression(
                f"/{group.node.path}/NodeGroupRole/Resource",
                "AwsSolutions-IAM4",
                "the three AWS managed policies EKS requires for managed node group instances",
                (
                    "Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKSWorkerNodePolicy",
                    "Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKS_CNI_Policy",
                    "Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
                ),
            )
            for group in stack.node.find_all()
            if isinstance(group, eks.Nodegroup)
        ],
        *(
            Suppression(
                f"{root}/Reconciler/{kind}Function/Resource",
                rule,
                "Python 3.13, not the newest Lambda Python: the build ships the bundle's bytecode only for "
                "a Python its machines have (3.14 is on none), halving the cold import (docs/reconciler.md)",
            )
            for kind in ("Stream", "Sweep")
            for rule in ("AwsSolutions-L1", "Serverless-LambdaLatestVersion")
        ),
        Suppression(
            f"{root}/DeadLetters/Resource",
            "Serverless-SQSRedrivePolicy",
            "this queue is the dead-letter queue of the stream mapping and the functions; it has none itself",
        ),
        Suppression(
            f"{root}/Reconciler/RolePolicy/Resource",
            "AwsSolutions-IAM5",
            "ENI management for private subnets, X-Ray and dynamodb:ListStreams take no resource; table keys "
            "of the home and this Region are unknown here, so key/* is bounded by kms:ViaService DynamoDB",
            (
                "Resource::*",
                *(
                    f"Resource::arn:<AWS::Partition>:kms:{r}:<AWS::AccountId>:key/*"
                    for r in dict.fromkeys([home_region, region])
                ),
            ),
        ),
        *addon_suppressions(stack),
        Suppression(
            f"{root}/StreamArn/RolePolicy/Resource",
            "AwsSolutions-IAM5",
            "ENI management for private subnets and X-Ray tracing take no resource-level permissions",
            ("Resource::*",),
        ),
    ]


def runner_suppressions(
    stack: Stack, regions: Sequence[str], home_region: str, prefix: str
) -> list[Suppression]:
    root = f"/{stack.stack_name}"
    arn = "Resource::arn:<AWS::Partition>:{service}:{region}:<AWS::AccountId>:{resource}"
    stacks = [
        arn.format(
            service="cloudformation", region=region, resource=f"stack/{regional_stack_name(region, prefix)}/*"
        )
        for region in regions
    ]
    invoke = [
        arn.format(service="execute-api", region=region, resource="*/*/*/inference/*")
        for region in regions
        if region != home_region
    ]
    home_invoke = RegexAppliesTo(
        regex=rf"/^Resource::arn:<AWS::Partition>:execute-api:{home_region}:<AWS::AccountId>:"
        r"<FrontDoorApi[0-9A-F]{8}>\/\*\/\*\/inference\/\*$/g"
    )
    return [
        Suppression(
            f"{root}/InstanceRolePolicy/Resource",
            "AwsSolutions-IAM5",
            "ecr:GetAuthorizationToken takes no resource; objects only under jobs/, evidence/ and the "
            "runner's own folder of each run (runs/<execution>/<aws:userid>/, files unknown before the run); "
            "a resumed matrix job reads back any earlier run under runs/ (read only); a Regional stack's "
            "ARN ends in its generated id; the front doors' routes are any method under /inference, and "
            "another Region's API id cannot be referenced from this stack (exports do not cross Regions)",
            (
                "Resource::*",
                *(_bucket(p) for p in ("jobs", "evidence", "runs")),
                _bucket(r"runs\/\*\/<aws:userid>"),
                *stacks,
                home_invoke,
                *invoke,
            ),
        ),
    ]


def apply(stack: Stack, suppressions: list[Suppression]) -> None:
    for item in suppressions:
        NagSuppressions.add_resource_suppressions_by_path(
            stack,
            item.path,
            [NagPackSuppression(id=item.rule, reason=item.reason, applies_to=list(item.applies_to) or None)],
        )
