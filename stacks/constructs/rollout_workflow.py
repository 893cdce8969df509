"""The rollout state machine: one execution per rollout, bounded steps, always back on the primary.

Begin (a Lambda: the first Region's canary) then a loop: Done? -> the outcome; Waiting? -> Wait then
Step; else Step (a Lambda measuring at most `blocks_per_step` blocks and looking after each,
`gco.rollout.service.advance`). Every Lambda task has a timeout and retries only Lambda's own
transient errors; a Catch on every task (States.ALL) runs GiveUp (the canary removed: every Region on
the primary) and ends FAILED `RolloutFailed`; a GiveUp that fails ends FAILED `GiveUpFailed`. An
execution aborted or timed out as a whole runs no state, so an EventBridge rule on the machine's
ABORTED, TIMED_OUT and FAILED status changes invokes GiveUp with the execution's input (idempotent:
it removes only this rollout's canary on this rollout's lifecycle). The machine's own timeout bounds
every execution. Verdicts end the execution: promoted SUCCEEDED (`Promoted`), rolled back or
inconclusive FAILED (`NotPromoted`, the reason as its cause).

A second Lambda on the table's stream (filtered to records holding `rollout_request`) starts the
execution for a table write (`lambdas/rollout_starter.py`); the CLI starts it with StartExecution.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ssm as ssm
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from gco.env import EVIDENCE_BUCKET_ENV, TABLE_ENV
from gco.front_door import PREFIX_ENV, regional_stack_name
from gco.rollout.execution import STATE_MACHINE_ENV
from gco.rollout.service import STREAM_FILTER
from stacks.bundling import ARCHITECTURE, BUNDLE_ENVIRONMENT, RUNTIME
from stacks.constructs.iam import managed_role, statement
from stacks.constructs.reconciler import KMS_VIA_DYNAMODB, XRAY_ACTIONS, dead_letter_queue, function_logs
from stacks.constructs.runner_workflow import LOG_DELIVERY, XRAY, logged_state_machine
from stacks.constructs.stream_filter import stream_filters

STEP_TIMEOUT_S = 900  # one Lambda invocation: a few blocks of streamed requests, Lambda's maximum
POLL_S = 15  # between looks while the canary starts
EXECUTION_TIMEOUT = Duration.hours(24)  # every Region's wait and analysis, with room
# The statuses of Step Functions' "Step Functions Execution Status Change" events that end an execution
# other than SUCCEEDED (https://docs.aws.amazon.com/step-functions/latest/dg/cw-events.html).
ENDED_WITHOUT_VERDICT = ["ABORTED", "TIMED_OUT", "FAILED"]
LAMBDA_TRANSIENT = [
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
]


class RolloutWorkflow(Construct):
    """The state machine, its step and starter functions, their roles and the give-up rule."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        prefix: str,
        regions: Sequence[str],
        table: dynamodb.TableV2,
        table_key: kms.IKey,
        bucket: s3.IBucket,
        key: kms.IKey,
        code: lambda_.Code,
        log_retention: logs.RetentionDays,
        validation_policy: ssm.IStringParameter,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        stacks = [
            stack.format_arn(
                service="cloudformation",
                region=r,
                resource="stack",
                resource_name=f"{regional_stack_name(r, prefix)}/*",
            )
            for r in regions
        ]
        invoke = [
            stack.format_arn(
                service="execute-api", region=r, resource="*", resource_name="*/POST/inference/*"
            )
            for r in regions
        ]
        machine_arn = stack.format_arn(
            service="states",
            resource="stateMachine",
            resource_name=name,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.dlq = dead_letter_queue(self, "DeadLetters", name=name, key=key)
        self.step_role, self.step_policy = managed_role(
            self,
            "StepRole",
            role_name=f"{name}-step-{stack.region}",
            service="lambda.amazonaws.com",
            description="gco rollout step: the endpoint's record, its Regions' front doors, the evidence",
            statements=[
                statement("Record", ["dynamodb:GetItem", "dynamodb:UpdateItem"], [table.table_arn]),
                statement("TableKey", KMS_VIA_DYNAMODB, [table_key.key_arn]),
                statement(
                    "Evidence", ["s3:PutObject", "s3:GetObject"], [bucket.arn_for_objects("evidence/*")]
                ),
                statement("EvidenceKey", ["kms:GenerateDataKey", "kms:Decrypt"], [table_key.key_arn]),
                # The canary's image is admitted as on the CLI's path (docs/deploy.md, "Validated
                # builds"): the policy parameter; the evidence index under evidence/ (GetObject above),
                # with ListBucket so a missing index key reads 404, not 403 (GetObject's API reference);
                # the tags of the account's private ECR repositories in any Region.
                statement("ValidationPolicy", ["ssm:GetParameter"], [validation_policy.parameter_arn]),
                statement("EvidenceIndex", ["s3:ListBucket"], [bucket.bucket_arn]),
                statement(
                    "ResolvePrivateTags",
                    ["ecr:DescribeImages"],
                    [stack.format_arn(service="ecr", region="*", resource="repository", resource_name="*")],
                ),
                statement("FrontDoors", ["cloudformation:DescribeStacks"], stacks),
                statement("Invoke", ["execute-api:Invoke"], invoke),
                statement(
                    "Logs",
                    ["logs:CreateLogStream", "logs:PutLogEvents"],
                    [self._log_arn(stack, name, "step")],
                ),
                statement("DeadLetters", ["sqs:SendMessage"], [self.dlq.queue_arn]),
                statement("QueueKey", ["kms:GenerateDataKey", "kms:Decrypt"], [key.key_arn]),
                statement("Tracing", XRAY_ACTIONS, ["*"]),
            ],
        )
        environment = {
            **BUNDLE_ENVIRONMENT,
            TABLE_ENV: table.table_name,
            EVIDENCE_BUCKET_ENV: bucket.bucket_name,
            PREFIX_ENV: prefix,
        }
        self.step = self._function(
            "StepFunction",
            f"{name}-step",
            "rollout.handler",
            code,
            self.step_role,
            environment,
            key,
            log_retention,
        )
        self.give_up = self._function(
            "GiveUpFunction", f"{name}-give-up", "rollout.give_up_handler", code, self.step_role,
            environment, key, log_retention,
        )  # fmt: skip
        for function in (self.step, self.give_up):
            function.node.add_dependency(self.step_policy)
        self.machine_role, self.machine_policy = managed_role(
            self,
            "MachineRole",
            role_name=f"{name}-{stack.region}",
            service="states.amazonaws.com",
            description="gco rollout state machine: invoke its own step and give-up functions",
            statements=[
                statement(
                    "InvokeSteps",
                    ["lambda:InvokeFunction"],
                    [self.step.function_arn, self.give_up.function_arn],
                ),
                statement("LogDelivery", LOG_DELIVERY, ["*"]),
                statement("Tracing", XRAY, ["*"]),
            ],
        )
        self.state_machine = logged_state_machine(
            self,
            name=name,
            role=self.machine_role,
            policy=self.machine_policy,
            definition=self._definition(),
            timeout=EXECUTION_TIMEOUT,
            log_key=key,
            log_retention=log_retention,
        )
        self.give_up_rule = events.Rule(
            self,
            "GiveUpRule",
            rule_name=f"{name}-give-up",
            description="an execution that ended without a verdict leaves the endpoint on the primary",
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=["Step Functions Execution Status Change"],
                detail={
                    "status": ENDED_WITHOUT_VERDICT,
                    "stateMachineArn": [self.state_machine.state_machine_arn],
                },
            ),
            targets=[targets.LambdaFunction(self.give_up, dead_letter_queue=self.dlq, retry_attempts=4)],
        )
        self.starter_role, self.starter_policy = managed_role(
            self,
            "StarterRole",
            role_name=f"{name}-starter-{stack.region}",
            service="lambda.amazonaws.com",
            description="gco rollout starter: read the table's stream, start the rollout state machine",
            statements=[
                statement(
                    "Stream",
                    ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"],
                    [table.table_stream_arn or ""],
                ),
                statement("ListStreams", ["dynamodb:ListStreams"], ["*"]),
                statement("StreamKey", ["kms:Decrypt"], [table_key.key_arn]),
                statement("Start", ["states:StartExecution"], [machine_arn]),
                statement(
                    "Logs",
                    ["logs:CreateLogStream", "logs:PutLogEvents"],
                    [self._log_arn(stack, name, "starter")],
                ),
                statement("DeadLetters", ["sqs:SendMessage"], [self.dlq.queue_arn]),
                statement("QueueKey", ["kms:GenerateDataKey", "kms:Decrypt"], [key.key_arn]),
                statement("Tracing", XRAY_ACTIONS, ["*"]),
            ],
        )
        self.starter = self._function(
            "StarterFunction", f"{name}-starter", "rollout_starter.handler", code, self.starter_role,
            {**BUNDLE_ENVIRONMENT, STATE_MACHINE_ENV: machine_arn}, key, log_retention,
        )  # fmt: skip
        self.starter.node.add_dependency(self.starter_policy)
        self.starter.add_event_source(
            sources.DynamoEventSource(
                table,
                starting_position=lambda_.StartingPosition.LATEST,
                batch_size=10,
                bisect_batch_on_error=True,
                retry_attempts=3,
                max_record_age=Duration.hours(1),
                on_failure=sources.SqsDlq(self.dlq),
                # Only records whose new image holds a request (Lambda event filtering on a DynamoDB
                # stream, https://docs.aws.amazon.com/lambda/latest/dg/with-ddb-filtering.html).
                filters=stream_filters(STREAM_FILTER),
            )
        )

    @staticmethod
    def _log_arn(stack: Stack, name: str, kind: str) -> str:
        return stack.format_arn(
            service="logs", resource="log-group", resource_name=f"/aws/lambda/{name}-{kind}:*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )  # fmt: skip

    def _function(
        self,
        construct_id: str,
        function_name: str,
        handler: str,
        code: lambda_.Code,
        role: iam.Role,
        environment: dict[str, str],
        key: kms.IKey,
        retention: logs.RetentionDays,
    ) -> lambda_.Function:
        return lambda_.Function(
            self,
            construct_id,
            function_name=function_name,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=handler,
            code=code,
            role=role.without_policy_updates(),
            memory_size=1024,  # numpy and scipy's import, the bootstrap
            timeout=Duration.seconds(STEP_TIMEOUT_S),
            environment=environment,
            environment_encryption=key,
            tracing=lambda_.Tracing.ACTIVE,
            dead_letter_queue=self.dlq,
            log_group=function_logs(
                self, f"{construct_id}Logs", name=function_name, key=key, retention=retention
            ),
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
        )

    def _invoke(
        self, state_name: str, function: lambda_.IFunction, payload: dict[str, object], result_path: str
    ) -> tasks.LambdaInvoke:
        task = tasks.LambdaInvoke(
            self,
            state_name,
            state_name=state_name,
            lambda_function=function,
            payload=sfn.TaskInput.from_object(payload),
            payload_response_only=True,
            result_path=result_path,
            retry_on_service_exceptions=False,
            task_timeout=sfn.Timeout.duration(Duration.seconds(STEP_TIMEOUT_S + 60)),
        )
        task.add_retry(errors=LAMBDA_TRANSIENT, interval=Duration.seconds(2), backoff_rate=2, max_attempts=3)
        return task

    def _definition(self) -> sfn.IChainable:
        # Every path GiveUp's payload reads exists from the first state on: a missing path is a
        # States.Runtime error, which no Catch catches (States.ALL "cannot catch States.DataLimitExceeded
        # terminal error or Runtime error types", docs.aws.amazon.com/step-functions/latest/dg/
        # concepts-error-handling.html); such a failure, or a state over the payload quota, ends the
        # execution FAILED, and the EventBridge rule gives up for it.
        init = sfn.Pass(
            self,
            "Init",
            state_name="Init",
            result=sfn.Result.from_object({"state": {}, "done": False, "waiting": False}),  # {}: no state yet
            result_path="$.rollout",
        )
        begin = self._invoke(
            "Begin", self.step, {"settings.$": "$.settings", "lifecycle_id.$": "$.lifecycle_id"}, "$.rollout"
        )
        step = self._invoke("Step", self.step, {"state.$": "$.rollout.state"}, "$.rollout")
        give_up = self._invoke(
            "GiveUp",
            self.give_up,
            {
                "state.$": "$.rollout.state",
                "settings.$": "$.settings",
                "lifecycle_id.$": "$.lifecycle_id",
                "error.$": "$.error",
            },
            "$.givenUp",
        )
        failed = sfn.Fail(
            self,
            "RolloutFailed",
            state_name="RolloutFailed",
            error="RolloutFailed",
            cause_path=sfn.JsonPath.format(
                "{}: {}", sfn.JsonPath.string_at("$.error.Error"), sfn.JsonPath.string_at("$.error.Cause")
            ),
        )
        give_up_failed = sfn.Fail(
            self, "GiveUpFailed", state_name="GiveUpFailed", error="GiveUpFailed",
            cause="the canary could not be removed; the EventBridge rule tries again",
        )  # fmt: skip
        give_up.add_catch(give_up_failed, errors=["States.ALL"], result_path="$.giveUpError")
        give_up.next(failed)
        promoted = sfn.Succeed(self, "Promoted", state_name="Promoted", output_path="$.rollout.state")
        not_promoted = sfn.Fail(
            self, "NotPromoted", state_name="NotPromoted", error="NotPromoted",
            cause_path=sfn.JsonPath.string_at("$.rollout.state.reason"),
        )  # fmt: skip
        wait = sfn.Wait(
            self,
            "AwaitCanary",
            state_name="AwaitCanary",
            time=sfn.WaitTime.duration(Duration.seconds(POLL_S)),
        )
        verdict = (
            sfn.Choice(self, "Verdict", state_name="Verdict")
            .when(sfn.Condition.string_equals("$.rollout.state.outcome", "promoted"), promoted)
            .otherwise(not_promoted)
        )
        loop = (
            sfn.Choice(self, "Done", state_name="Done")
            .when(sfn.Condition.boolean_equals("$.rollout.done", True), verdict)
            .when(sfn.Condition.boolean_equals("$.rollout.waiting", True), wait)
            .otherwise(step)
        )
        wait.next(step)
        for task in (begin, step):
            task.add_catch(give_up, errors=["States.ALL"], result_path="$.error")
            task.next(loop)
        return init.next(begin)
