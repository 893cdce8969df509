"""cdk-nag suppressions of the cluster add-ons: the kubectl provider CDK builds, and the autoscaler's role.

The kubectl provider (a handler Lambda with kubectl and helm, and the custom-resource framework's
onEvent Lambda) is CDK's own construct: its roles, policies and function settings are not ours to
shape, and it runs only during deployments, so the findings about it are accepted here one by one.
"""

from __future__ import annotations

from aws_cdk import Stack
from cdk_nag import RegexAppliesTo

from stacks.suppressions import PACKS, Suppression

LAMBDA_BASIC = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
LAMBDA_VPC = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"
ECR_READ = "Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly"
ECR_PUBLIC_READ = RegexAppliesTo(regex=r"/^Policy::.*AmazonElasticContainerRegistryPublicReadOnly.*$/g")
DEPLOY_TIME = "runs only while CloudFormation deploys the cluster's Kubernetes objects"


def addon_suppressions(stack: Stack) -> list[Suppression]:
    root, region = f"/{stack.stack_name}", stack.region
    provider = f"{root}/Eks/Cluster/KubectlProvider"
    handler, on_event = f"{provider}/Handler", f"{provider}/Provider/framework-onEvent"
    found = [
        Suppression(
            f"{handler}/ServiceRole/Resource",
            "AwsSolutions-IAM4",
            "CDK's kubectl provider: Lambda logging and VPC access, and reading chart images from ECR",
            (LAMBDA_BASIC, LAMBDA_VPC, ECR_READ, ECR_PUBLIC_READ),
        ),
        Suppression(
            f"{on_event}/ServiceRole/Resource",
            "AwsSolutions-IAM4",
            "CDK's custom-resource framework function: Lambda logging and VPC access",
            (LAMBDA_BASIC, LAMBDA_VPC),
        ),
        Suppression(
            f"{on_event}/ServiceRole/DefaultPolicy/Resource",
            "AwsSolutions-IAM5",
            "the framework invokes any version of the kubectl handler it fronts (that function only)",
            (RegexAppliesTo(regex=r"/^Resource::<EksClusterKubectlProviderHandler[0-9A-F]{8}\.Arn>:\*$/g"),),
        ),
        Suppression(
            f"{handler}/Resource",
            "AwsSolutions-L1",
            "CDK's kubectl handler pins its own Python runtime (CDK's code)",
        ),
        Suppression(
            f"{root}/Addons/AutoscalerRolePolicy/Resource",
            "AwsSolutions-IAM5",
            "the autoscaler's Describe* reads take no resource; it scales only groups tagged with this "
            "cluster's name and describes only this cluster's node groups, whose names and ARNs EKS "
            "generates",
            (
                "Resource::*",
                f"Resource::arn:<AWS::Partition>:autoscaling:{region}:<AWS::AccountId>:"
                "autoScalingGroup:*:autoScalingGroupName/*",
                RegexAppliesTo(
                    regex=rf"/^Resource::arn:<AWS::Partition>:eks:{region}:<AWS::AccountId>:nodegroup\/.*\/\*\/\*$/g"
                ),
            ),
        ),
    ]
    for function in (handler, on_event):
        found += [Suppression(f"{function}/ServiceRole/DefaultPolicy/Resource", f"{pack}-IAMNoInlinePolicy",
                              "CDK's kubectl provider writes its grants as the role's default policy")
                  for pack in PACKS]  # fmt: skip
        for rule in ("LambdaConcurrency", "LambdaDLQ"):
            found += [Suppression(f"{function}/Resource", f"{pack}-{rule}", DEPLOY_TIME) for pack in PACKS]
        found += [
            Suppression(f"{function}/Resource", "Serverless-LambdaDLQ", DEPLOY_TIME),
            Suppression(f"{function}/Resource", "Serverless-LambdaTracing", DEPLOY_TIME),
        ]
    found += [
        Suppression(f"{on_event}/Resource", "Serverless-LambdaDefaultMemorySize", DEPLOY_TIME),
        Suppression(
            f"{handler}/Resource",
            "Serverless-LambdaLatestVersion",
            "CDK's kubectl handler pins its runtime (CDK's code, upgraded with aws-cdk-lib)",
        ),
    ]
    return found
