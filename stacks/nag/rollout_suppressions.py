"""The rollout state machine's cdk-nag suppressions (`stacks/constructs/rollout_workflow.py`)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack
from cdk_nag import RegexAppliesTo

from gco.front_door import regional_stack_name
from stacks.nag.suppression import Suppression, each_pack

FUNCTIONS = ("Step", "GiveUp", "Starter")


def rollout_suppressions(stack: Stack, regions: Sequence[str], prefix: str) -> list[Suppression]:
    root, home = f"/{stack.stack_name}/Rollout", stack.region
    arn = "Resource::arn:<AWS::Partition>:{service}:{region}:<AWS::AccountId>:{resource}"
    logs = [
        arn.format(service="logs", region=home, resource=f"log-group:/aws/lambda/{prefix}-rollout-{kind}:*")
        for kind in ("step", "starter")
    ]
    return [
        *(
            Suppression(
                f"{root}/{kind}Function/Resource",
                rule,
                "Python 3.13, not the newest Lambda Python: the bundle's bytecode is built only for a Python "
                "its build machines have (stacks/bundling.py), as for the reconciler's functions",
            )
            for kind in FUNCTIONS
            for rule in ("AwsSolutions-L1", "Serverless-LambdaLatestVersion")
        ),
        *(
            item
            for kind in FUNCTIONS
            for item in each_pack(
                f"{root}/{kind}Function/Resource",
                "LambdaInsideVPC",
                "the global stack has no VPC; the function calls only AWS endpoints (DynamoDB, S3, Step "
                "Functions, CloudFormation) and the Regions' IAM-authorized front doors, all over TLS",
            )
        ),
        *(
            Suppression(
                f"{root}/{kind}Function/Resource",
                f"{pack}-LambdaConcurrency",
                "called only by the rollout state machine (one task at a time per execution) and by the "
                "table stream's mapping filtered to rollout requests: a reservation would take from the home "
                "Region's account pool, which gco's quota arithmetic keeps to the Regional reconcilers' "
                "(gco/deployment/capacity.py)",
            )
            for kind in FUNCTIONS
            for pack in ("HIPAA.Security", "NIST.800.53.R5")
        ),
        Suppression(
            f"{root}/DeadLetters/Resource",
            "Serverless-SQSRedrivePolicy",
            "this queue is the dead-letter queue of the rollout's functions and stream mapping; it has none",
        ),
        Suppression(
            f"{root}/StepRolePolicy/Resource",
            "AwsSolutions-IAM5",
            "evidence records are written under evidence/ by content id (unknown before); a Regional "
            "stack's ARN ends in its generated id; another Region's front door API id cannot be referenced "
            "from this stack, so its POST routes under /inference are named by Region; the function's own "
            "log streams; X-Ray takes no resource; a canary's image may be any private ECR repository "
            "of the account in any Region, whose tag the admission check resolves (ecr:DescribeImages)",
            (
                "Resource::*",
                RegexAppliesTo(regex=r"/^Resource::<EvidenceBucket[0-9A-F]{8}\.Arn>\/evidence\/\*$/g"),
                *(
                    arn.format(
                        service="cloudformation",
                        region=r,
                        resource=f"stack/{regional_stack_name(r, prefix)}/*",
                    )
                    for r in regions
                ),
                *(
                    arn.format(service="execute-api", region=r, resource="*/*/POST/inference/*")
                    for r in regions
                ),
                logs[0],
                "Resource::arn:<AWS::Partition>:ecr:*:<AWS::AccountId>:repository/*",
            ),
        ),
        Suppression(
            f"{root}/StarterRolePolicy/Resource",
            "AwsSolutions-IAM5",
            "dynamodb:ListStreams and X-Ray take no resource; the function's own log streams",
            ("Resource::*", logs[1]),
        ),
        Suppression(
            f"{root}/MachineRolePolicy/Resource",
            "AwsSolutions-IAM5",
            "Step Functions' log delivery and X-Ray calls take no resource-level permissions",
            ("Resource::*",),
        ),
    ]
