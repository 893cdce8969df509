"""The customer-managed keys of the stacks, and log retention by configured days.

Table keys carry a Region-wide alias so replicas can name them; stack keys serve logs, queues, topics.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.constructs.iam import key_policy

RETENTION = {
    30: logs.RetentionDays.ONE_MONTH,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    731: logs.RetentionDays.TWO_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


def stack_key(scope: Construct, construct_id: str, *, alias: str, description: str) -> kms.Key:
    """A key for this stack's logs, queues, topics, secrets and Lambda environments.

    CloudWatch Logs (for this account's log groups), EventBridge (DLQ sends) and CloudWatch alarms
    (the encrypted topic) may use it; everything else goes through IAM. It is retained with the
    log groups it encrypts (CloudWatch keeps those after the stack), so their records stay readable.
    """
    stack = Stack.of(scope)
    log_groups = stack.format_arn(
        service="logs", resource="log-group", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
    )
    return kms.Key(
        scope,
        construct_id,
        alias=alias,
        description=description,
        enable_key_rotation=True,
        removal_policy=RemovalPolicy.RETAIN,
        policy=key_policy(
            stack.account,
            [
                (
                    f"logs.{stack.region}.amazonaws.com",
                    {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": log_groups}},
                ),
                ("events.amazonaws.com", None),
                ("cloudwatch.amazonaws.com", None),
            ],
        ),
    )


def replica_key_alias(prefix: str) -> str:
    """The alias of each Region's table key (created by that Region's keys stack)."""
    return f"alias/{prefix}-endpoints"


def table_key(scope: Construct, construct_id: str, *, prefix: str, description: str) -> kms.Key:
    """A customer-managed key with rotation and the Region-wide table alias."""
    return kms.Key(
        scope,
        construct_id,
        alias=replica_key_alias(prefix),
        description=description,
        enable_key_rotation=True,
        removal_policy=RemovalPolicy.RETAIN,
        policy=key_policy(Stack.of(scope).account),
    )
