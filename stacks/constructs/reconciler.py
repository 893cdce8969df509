"""The Regional reconciler: stream-triggered and scheduled Lambdas, their DLQ and alarms."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from gco.deployment.capacity import SWEEP_RESERVED_CONCURRENCY
from gco.reconcile.environment import ReconcilerEnvironment
from gco.reconcile.failures import METRICS_NAMESPACE, SWEEP_SERVICE, UNREADABLE_METRIC
from gco.reconcile.heartbeat import parameter_arn
from gco.reconcile.throughput import STREAM_RESERVED_CONCURRENCY, STREAM_SETTINGS
from gco.secrets.endpoint_secrets import iam_resources
from stacks.bundling import ARCHITECTURE, BUNDLE_ENVIRONMENT, RUNTIME
from stacks.constructs.iam import managed_role, statement
from stacks.constructs.retained import retained_name

TABLE_ACTIONS = [
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",  # a batch's records in one read (`RecordTable.get_many`)
    "dynamodb:Query",
    "dynamodb:Scan",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:DescribeTable",
]
STREAM_ACTIONS = ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"]
KMS_VIA_DYNAMODB = ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"]
# The actions Lambda needs to attach a function to private subnets; EC2 does not scope them.
ENI_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
]
XRAY_ACTIONS = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"]


def _secret_statements(
    stack: Stack, environment: ReconcilerEnvironment, home_region: str, kms_keys: tuple[str, ...] = ()
) -> list[iam.PolicyStatement]:
    """Read exactly the secrets endpoints may name (`cdk.json` gco.endpoint_secrets), where it names any:
    the reconciler writes their values into each endpoint's Kubernetes Secret (gco.secrets.endpoint_secrets).

    A secret encrypted under a customer managed key is decrypted by Secrets Manager on the caller's
    behalf, so the caller needs `kms:Decrypt` on that key (docs.aws.amazon.com/secretsmanager/latest/
    userguide/security-encryption.html, "Permissions for the KMS key"); granted on the configured keys
    (`cdk.json` gco.endpoint_secret_kms_keys) only when Secrets Manager in the key's Region asks for it
    (`kms:ViaService`: secretsmanager.<region>.amazonaws.com, docs.aws.amazon.com/kms/latest/
    developerguide/conditions-kms.html#conditions-kms-via-service)."""
    if not environment.endpoint_secrets:
        return []
    arns = iam_resources(
        environment.endpoint_secrets, partition=stack.partition, region=home_region, account=stack.account
    )
    statements = [statement("EndpointSecrets", ["secretsmanager:GetSecretValue"], arns)]
    if kms_keys:
        key_regions = sorted({key.split(":")[3] for key in kms_keys})
        statements.append(
            statement(
                "EndpointSecretKeysViaSecretsManager",
                ["kms:Decrypt"],
                list(kms_keys),
                StringEquals={"kms:ViaService": [f"secretsmanager.{r}.amazonaws.com" for r in key_regions]},
            )
        )
    return statements


def dead_letter_queue(scope: Construct, construct_id: str, *, name: str, key: kms.IKey) -> sqs.Queue:
    """The Region's dead-letter queue: stream records that keep failing, failed async invocations."""
    return sqs.Queue(
        scope,
        construct_id,
        queue_name=f"{name}-dlq",
        encryption=sqs.QueueEncryption.KMS,
        encryption_master_key=key,
        enforce_ssl=True,
        retention_period=Duration.days(14),
    )


def function_logs(
    scope: Construct, construct_id: str, *, name: str, key: kms.IKey, retention: logs.RetentionDays
) -> logs.LogGroup:
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=retained_name(scope, f"/aws/lambda/{name}"),
        retention=retention,
        encryption_key=key,
    )


class Reconciler(Construct):
    """Two functions on one role: the stream handler and the sweep.

    The stream mapping reports partial batch failures, bisects on error, bounds retries and record
    age, and sends records that still fail to an SQS dead-letter queue. Alarms cover DLQ depth,
    iterator age and errors of both functions.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        code: lambda_.Code,
        environment: ReconcilerEnvironment,
        stream_arn: str,
        cluster_arn: str,
        vpc: ec2.IVpc,
        security_group: ec2.ISecurityGroup,
        dlq: sqs.Queue,
        key: kms.IKey,
        sweep_minutes: int,
        log_retention: logs.RetentionDays,
        alarm_emails: tuple[str, ...] = (),
        alarm_topic_arns: tuple[str, ...] = (),
        secret_kms_keys: tuple[str, ...] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        # The sweep writes its interval into its heartbeat (gco.reconcile.heartbeat): the schedule's.
        environment = environment.model_copy(update={"sweep_seconds": float(sweep_minutes * 60)})
        home_region, table_name = environment.home_region or stack.region, environment.table_name
        regions = list(dict.fromkeys([home_region, stack.region]))
        self.security_group, self.dlq = security_group, dlq
        log_groups = {
            kind: function_logs(
                self, f"{kind.title()}Logs", name=f"{name}-{kind}", key=key, retention=log_retention
            )
            for kind in ("stream", "sweep")
        }
        self.role, self.policy = managed_role(
            self,
            "Role",
            role_name=f"{name}-{stack.region}",
            service="lambda.amazonaws.com",
            description="gco reconciler: the home table, this Region's stream and cluster, its heartbeat, "
            "its own logs",
            statements=[
                statement(
                    "HomeTable",
                    TABLE_ACTIONS,
                    [
                        stack.format_arn(
                            service="dynamodb", region=home_region, resource="table", resource_name=table_name
                        )
                    ],
                ),
                statement("OwnStream", STREAM_ACTIONS, [stream_arn]),
                statement("ListStreams", ["dynamodb:ListStreams"], ["*"]),
                statement(
                    "TableKeysViaDynamoDB",
                    KMS_VIA_DYNAMODB,
                    [
                        stack.format_arn(service="kms", region=r, resource="key", resource_name="*")
                        for r in regions
                    ],
                    StringEquals={
                        "kms:ViaService": [f"dynamodb.{r}.amazonaws.com" for r in regions],
                        "kms:CallerAccount": stack.account,
                    },
                ),
                statement("StackKey", ["kms:Decrypt", "kms:GenerateDataKey"], [key.key_arn]),
                statement("DeadLetters", ["sqs:SendMessage"], [self.dlq.queue_arn]),
                statement("OwnCluster", ["eks:DescribeCluster"], [cluster_arn]),
                statement(
                    "Heartbeat",
                    ["ssm:PutParameter"],
                    [
                        parameter_arn(
                            partition=stack.partition,
                            region=stack.region,
                            account=stack.account,
                            table=table_name,
                        )
                    ],
                ),
                statement(
                    "OwnLogs",
                    ["logs:CreateLogStream", "logs:PutLogEvents"],
                    [group.log_group_arn for group in log_groups.values()],
                ),
                statement("PrivateSubnets", ENI_ACTIONS, ["*"]),
                statement("Tracing", XRAY_ACTIONS, ["*"]),
                *_secret_statements(stack, environment, home_region, secret_kms_keys),
            ],
        )
        self.functions: dict[str, lambda_.Function] = {}
        for kind, handler, timeout in (
            ("stream", "reconciler.handler", 300),
            ("sweep", "sweep.handler", 900),
        ):
            function = lambda_.Function(
                self,
                f"{kind.title()}Function",
                function_name=f"{name}-{kind}",
                runtime=RUNTIME,
                architecture=ARCHITECTURE,
                handler=handler,
                code=code,
                role=self.role.without_policy_updates(),
                memory_size=512,
                timeout=Duration.seconds(timeout),
                reserved_concurrent_executions=STREAM_RESERVED_CONCURRENCY
                if kind == "stream"
                else SWEEP_RESERVED_CONCURRENCY,
                environment={
                    **environment.to_env(),
                    **BUNDLE_ENVIRONMENT,
                    "POWERTOOLS_SERVICE_NAME": f"gco-{kind}",
                },
                environment_encryption=key,
                tracing=lambda_.Tracing.ACTIVE,
                vpc=vpc,
                vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
                security_groups=[self.security_group],
                dead_letter_queue=self.dlq,
                log_group=log_groups[kind],
                logging_format=lambda_.LoggingFormat.JSON,
                application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
                system_log_level_v2=lambda_.SystemLogLevel.WARN,
            )
            function.node.add_dependency(self.policy)
            self.functions[kind] = function
        self.mapping = lambda_.EventSourceMapping(
            self,
            "StreamMapping",
            target=self.functions["stream"],
            event_source_arn=stream_arn,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            # From the cost model of one reconcile (gco/reconcile/throughput.py, docs/scale.md):
            # small batches, several in flight per shard (order kept per endpoint), no window.
            batch_size=STREAM_SETTINGS.batch_size,
            parallelization_factor=STREAM_SETTINGS.parallelization_factor,
            max_batching_window=Duration.seconds(STREAM_SETTINGS.batching_window_seconds),
            bisect_batch_on_error=True,
            retry_attempts=5,
            max_record_age=Duration.hours(1),
            report_batch_item_failures=True,
            on_failure=sources.SqsDlq(self.dlq),
        )
        self.mapping.node.add_dependency(self.policy)
        self.schedule = events.Rule(
            self,
            "SweepSchedule",
            rule_name=f"{name}-sweep",
            schedule=events.Schedule.rate(Duration.minutes(sweep_minutes)),
            targets=[
                targets.LambdaFunction(
                    self.functions["sweep"],
                    dead_letter_queue=self.dlq,
                    retry_attempts=2,
                    max_event_age=Duration.minutes(sweep_minutes),
                )
            ],
        )
        self.alarm_topic = sns.Topic(
            self, "Alarms", topic_name=f"{name}-alarms", master_key=key, enforce_ssl=True
        )
        for email in alarm_emails:
            self.alarm_topic.add_subscription(subscriptions.EmailSubscription(email))
        # SNS cannot subscribe a topic to a topic, so the alarms notify an existing topic directly;
        # CloudWatch takes only topics of the alarm's own Region as actions.
        self.alarm_targets: list[sns.ITopic] = [self.alarm_topic] + [
            sns.Topic.from_topic_arn(self, f"ExistingTopic{i}", arn)
            for i, arn in enumerate(alarm_topic_arns, start=1)
            if arn.split(":")[3] == stack.region
        ]
        self.alarms = self._alarms(name, sweep_minutes)

    def _alarms(self, name: str, sweep_minutes: int) -> list[cloudwatch.Alarm]:
        stream, sweep = self.functions["stream"], self.functions["sweep"]
        five = Duration.minutes(5)
        # Every sweep counts the table's unreadable records: the alarm looks over at least one sweep.
        unreadable = cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=UNREADABLE_METRIC,
            dimensions_map={"service": SWEEP_SERVICE},
            statistic="Maximum",
            period=Duration.minutes(max(5, sweep_minutes)),
        )
        specs = [
            ("DlqDepth", self.dlq.metric_approximate_number_of_messages_visible(period=five), 0),
            ("IteratorAge", stream.metric("IteratorAge", statistic="Maximum", period=five), 300_000),
            ("StreamErrors", stream.metric_errors(period=five), 0),
            ("SweepErrors", sweep.metric_errors(period=five), 0),
            ("UnreadableRecords", unreadable, 0),
        ]
        alarms = []
        for alarm_id, metric, threshold in specs:
            alarm = cloudwatch.Alarm(
                self,
                alarm_id,
                alarm_name=f"{name}-{alarm_id}",
                metric=metric,
                threshold=threshold,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            for topic in self.alarm_targets:
                alarm.add_alarm_action(actions.SnsAction(topic))
                alarm.add_ok_action(actions.SnsAction(topic))
            alarms.append(alarm)
        return alarms
