"""The ARN of this Region's copy of the table stream, read at deploy time.

A global table's replica stream ARN is known only in its own Region, after the replica exists, so a
small custom resource (inline code, no Docker, no provider framework) reads it with DescribeTable
(`stacks/constructs/stream_arn_handler.py`: it answers FAILED with the reason on any error). It runs again
whenever `stream_identity` changes: the table, its stream view type or the set of Regions with a
replica, which are what re-creates a Region's stream.
Its function is configured like every other gco function: private subnets, tracing, a DLQ,
reserved concurrency, encrypted logs, and a role with one managed policy naming the table.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CustomResource, Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from gco.deployment.capacity import STREAM_LOOKUP_RESERVED_CONCURRENCY
from stacks.bundling import INLINE_RUNTIME
from stacks.constructs.iam import managed_role, statement
from stacks.constructs.reconciler import ENI_ACTIONS, XRAY_ACTIONS, function_logs

# The handler's source, deployed inline (ZipFile code is limited to 4,096 characters).
HANDLER = (Path(__file__).parent / "stream_arn_handler.py").read_text(encoding="utf-8")
INLINE_LIMIT = 4096


class StreamArnLookup(Construct):
    """`stream_arn`: the LatestStreamArn of `table_name` in this stack's Region."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        table_name: str,
        stream_identity: dict[str, str],
        vpc: ec2.IVpc,
        key: kms.IKey,
        dlq: sqs.IQueue,
        security_group: ec2.ISecurityGroup,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        if len(HANDLER) > INLINE_LIMIT:
            raise ValueError(
                f"stream_arn_handler.py is {len(HANDLER)} characters; inline code allows {INLINE_LIMIT}"
            )
        stack = Stack.of(self)
        log_group = function_logs(self, "Logs", name=name, key=key, retention=log_retention)
        role, policy = managed_role(
            self,
            "Role",
            role_name=f"{name}-{stack.region}",
            service="lambda.amazonaws.com",
            description="gco stream lookup: DescribeTable on the endpoint table in this Region",
            statements=[
                statement(
                    "DescribeTable",
                    ["dynamodb:DescribeTable"],
                    [stack.format_arn(service="dynamodb", resource="table", resource_name=table_name)],
                ),
                statement("StackKey", ["kms:Decrypt", "kms:GenerateDataKey"], [key.key_arn]),
                statement("DeadLetters", ["sqs:SendMessage"], [dlq.queue_arn]),
                statement(
                    "OwnLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], [log_group.log_group_arn]
                ),
                statement("PrivateSubnets", ENI_ACTIONS, ["*"]),
                statement("Tracing", XRAY_ACTIONS, ["*"]),
            ],
        )
        self.function = lambda_.Function(
            self,
            "Function",
            function_name=name,
            runtime=INLINE_RUNTIME,
            handler="index.handler",
            code=lambda_.Code.from_inline(HANDLER),
            role=role.without_policy_updates(),
            memory_size=256,
            timeout=Duration.seconds(120),
            reserved_concurrent_executions=STREAM_LOOKUP_RESERVED_CONCURRENCY,
            tracing=lambda_.Tracing.ACTIVE,
            environment_encryption=key,
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            security_groups=[security_group],
            dead_letter_queue=dlq,
            log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON,
        )
        self.function.node.add_dependency(policy)
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=self.function.function_arn,
            resource_type="Custom::GcoStreamArn",
            properties={"TableName": table_name, **stream_identity},
        )
        self.stream_arn = self.resource.get_att_string("StreamArn")
