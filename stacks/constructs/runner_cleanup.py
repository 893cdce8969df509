"""Terminate a runner whose execution ended without its own terminate step succeeding.

An execution aborted or timed out as a whole runs no state; one whose terminate step exhausted its
retries ends FAILED. An EventBridge rule on the runner workflow's FAILED, ABORTED and TIMED_OUT
status changes starts a small
state machine that finds the execution's instance by its job tag and terminates it. Together with the
workflow's own terminate steps and the instance's self-shutdown, every way an execution ends leaves
no GPU instance running.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from stacks.constructs.iam import managed_role, statement
from stacks.constructs.runner_workflow import (
    JOB_TAG,
    LOG_DELIVERY,
    RUNNER_TAG,
    XRAY,
    logged_state_machine,
    terminate_instances,
    with_backoff,
)

LIVE_STATES = ["pending", "running", "stopping", "stopped"]
# Statuses after which the workflow's instance may still run (a FAILED run whose instance was
# terminated finds nothing: the cleanup is idempotent).
ENDED_WITHOUT_TERMINATE = ["FAILED", "ABORTED", "TIMED_OUT"]


class RunnerCleanup(Construct):
    """The cleanup state machine, its trigger rule and the rule's dead-letter queue."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        workflow_name: str,
        workflow_arn: str,
        key: kms.IKey,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        instances = stack.format_arn(service="ec2", resource="instance", resource_name="*")
        role, policy = managed_role(
            self,
            "Role",
            role_name=f"{name}-{stack.region}",
            service="states.amazonaws.com",
            description="gco runner cleanup: find and terminate the instance of an aborted or timed-out run",
            statements=[
                statement("FindInstances", ["ec2:DescribeInstances"], ["*"]),
                statement(
                    "TerminateOwnInstances",
                    ["ec2:TerminateInstances"],
                    [instances],
                    StringEquals={f"aws:ResourceTag/{RUNNER_TAG}": workflow_name},
                ),
                statement("LogDelivery", LOG_DELIVERY, ["*"]),
                statement("Tracing", XRAY, ["*"]),
            ],
        )
        find = tasks.CallAwsService(
            self,
            "FindInstance",
            state_name="FindInstance",
            service="ec2",
            action="describeInstances",
            iam_resources=["*"],
            parameters={
                "Filters": [
                    {
                        "Name": f"tag:{JOB_TAG}",
                        "Values": sfn.JsonPath.array(
                            sfn.JsonPath.format("jobs/{}.json", sfn.JsonPath.string_at("$.detail.name"))
                        ),
                    },
                    {"Name": f"tag:{RUNNER_TAG}", "Values": [workflow_name]},
                    {"Name": "instance-state-name", "Values": LIVE_STATES},
                ]
            },
            result_selector={
                "Count": sfn.JsonPath.array_length(sfn.JsonPath.list_at("$.Reservations")),
                "InstanceIds": sfn.JsonPath.list_at("$.Reservations[*].Instances[*].InstanceId"),
            },
            result_path="$.found",
        )
        terminate = terminate_instances(
            self, "Terminate", instance_ids="$.found.InstanceIds", instance_arn=instances
        )
        with_backoff(find, ["Ec2.RequestLimitExceeded"], max_attempts=8)
        nothing = sfn.Succeed(self, "NothingRunning", state_name="NothingRunning")
        # With no instance left, the instance-id path matches nothing: a runtime error meaning "none".
        find.add_catch(nothing, errors=["States.Runtime"], result_path="$.error")
        definition = find.next(
            sfn.Choice(self, "AnyInstance", state_name="AnyInstance")
            .when(sfn.Condition.number_greater_than("$.found.Count", 0), terminate)
            .otherwise(nothing)
        )
        self.state_machine = logged_state_machine(
            self,
            name=name,
            role=role,
            policy=policy,
            definition=definition,
            timeout=Duration.minutes(30),
            log_key=key,
            log_retention=log_retention,
        )
        self.dlq = sqs.Queue(
            self,
            "DeadLetters",
            queue_name=f"{name}-dlq",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        events_role, events_policy = managed_role(
            self,
            "TriggerRole",
            role_name=f"{name}-trigger-{stack.region}",
            service="events.amazonaws.com",
            description="EventBridge: start the runner cleanup state machine",
            statements=[
                statement("StartCleanup", ["states:StartExecution"], [self.state_machine.state_machine_arn])
            ],
        )
        self.rule = events.Rule(
            self,
            "OnAbortOrTimeout",
            rule_name=name,
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=["Step Functions Execution Status Change"],
                detail={"status": ENDED_WITHOUT_TERMINATE, "stateMachineArn": [workflow_arn]},
            ),
            targets=[
                targets.SfnStateMachine(
                    self.state_machine,
                    role=events_role.without_policy_updates(),
                    dead_letter_queue=self.dlq,
                    retry_attempts=8,
                    max_event_age=Duration.hours(2),
                )
            ],
        )
        self.rule.node.add_dependency(events_policy)
