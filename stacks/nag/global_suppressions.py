"""cdk-nag suppressions for each Region's part of the global address
(`stacks/constructs/global_front_door.py`): the global REST API, its bearer-key authorizer function
and that function's role.

One path, one rule, one reason each, like `stacks/nag/suppressions.py`.
"""

from __future__ import annotations

from aws_cdk import Stack

from stacks.constructs.front_door import STAGE
from stacks.nag.suppression import Suppression, each_pack

BEARER = "every request carries a bearer key that the Lambda authorizer checks against the keys table"


def global_front_door_suppressions(stack: Stack) -> list[Suppression]:
    """The findings of one Regional stack's global front door (none without `global_address`)."""
    root = f"/{stack.stack_name}/GlobalFrontDoor"
    function = f"{root}/AuthorizerFunction/Resource"
    stage = f"{root}/Api/DeploymentStage.{STAGE}/Resource"
    health = f"{root}/Api/Default/healthz/GET/Resource"
    inference = f"{root}/Api/Default/inference/{{proxy+}}/ANY/Resource"
    synchronous = (
        "API Gateway invokes the authorizer synchronously and answers the caller itself; a dead-letter "
        "queue applies only to asynchronous invocations"
    )
    return [
        Suppression(
            f"{root}/AuthorizerRolePolicy/Resource",
            "AwsSolutions-IAM5",
            "ENI management for the private subnets and X-Ray tracing take no resource-level permissions",
            ("Resource::*",),
        ),
        *(
            Suppression(
                function,
                rule,
                "Python 3.13, not the newest Lambda Python: the build ships the bundle's bytecode only for "
                "a Python its machines have, halving the cold import (docs/reconciler.md)",
            )
            for rule in ("AwsSolutions-L1", "Serverless-LambdaLatestVersion")
        ),
        Suppression(function, "Serverless-LambdaDLQ", synchronous),
        *(
            Suppression(function, f"{pack}-LambdaDLQ", synchronous)
            for pack in ("HIPAA.Security", "NIST.800.53.R5")
        ),
        *(
            Suppression(
                function,
                f"{pack}-LambdaConcurrency",
                "the authorizer runs for every request: a reserved limit would throttle callers below the "
                "stage's own throttle (1000 requests/s, burst 2000), which already bounds its concurrency",
            )
            for pack in ("HIPAA.Security", "NIST.800.53.R5")
        ),
        Suppression(
            f"{root}/Api/Resource",
            "AwsSolutions-APIG2",
            "the inference method's validator requires its path parameter; the body is the engine's to "
            "validate, and the health method takes no input",
        ),
        Suppression(inference, "AwsSolutions-COG4", f"callers are API clients, not Cognito users: {BEARER}"),
        Suppression(
            health,
            "AwsSolutions-APIG4",
            "Route 53 health checkers send no credentials; the method answers only the proxy's `ok`",
        ),
        Suppression(
            health,
            "AwsSolutions-COG4",
            "Route 53 health checkers send no credentials; the method answers only the proxy's `ok`",
        ),
        *[
            Suppression(
                stage,
                rule,
                f"no WAF web ACL: {BEARER}; request bodies are prompts a WAF rule set cannot judge",
            )
            for rule in (
                "AwsSolutions-APIG3",
                "NIST.800.53.R5-APIGWAssociatedWithWAF",
                "PCI.DSS.321-APIGWAssociatedWithWAF",
            )
        ],
        *each_pack(
            stage,
            "APIGWCacheEnabledAndEncrypted",
            "a streamed integration (responseTransferMode STREAM) cannot use the stage cache, and LLM "
            "answers to the same request are not reusable",
        ),
        *[
            Suppression(
                stage,
                rule,
                "execution logs need the account-wide API Gateway CloudWatch role; the stage's access log "
                "records every request (status, integration latency and error), KMS-encrypted, and the "
                "authorizer logs each decision with the key's id",
            )
            for rule in (
                "AwsSolutions-APIG6",
                "HIPAA.Security-APIGWExecutionLoggingEnabled",
                "NIST.800.53.R5-APIGWExecutionLoggingEnabled",
                "PCI.DSS.321-APIGWExecutionLoggingEnabled",
            )
        ],
        *each_pack(
            stage,
            "APIGWSSLEnabled",
            "a backend client certificate applies to HTTP integrations over the internet; this one is "
            "private, through the VPC link to an internal ALB that admits only the link's security group",
        ),
    ]
