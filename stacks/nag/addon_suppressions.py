"""cdk-nag suppressions of the cluster add-ons: the Cluster Autoscaler's role.

The kubectl provider that installs the add-ons' charts is CDK's own construct; its findings are
accepted one by one in `stacks/nag/suppressions_k8s.py`.
"""

from __future__ import annotations

from aws_cdk import Stack
from cdk_nag import RegexAppliesTo

from stacks.nag.suppression import Suppression


def addon_suppressions(stack: Stack) -> list[Suppression]:
    root, region = f"/{stack.stack_name}", stack.region
    return [
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
