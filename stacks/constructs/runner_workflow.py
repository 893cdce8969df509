"""The GPU runner state machine: launch, await the runner, run the job on heartbeats, always terminate.

ReadQueueTimeout reads how long the execution may wait for its runner: the job's
`settings.queue_timeout_seconds` when it has one (a matrix job), else the deployment's runner
`boot_seconds`. Launch starts one instance from the first zone's launch template, tagged with the job's
S3 key; when EC2 refuses (no GPU capacity in that Availability Zone, most often), the next zone's
template is tried (`RUNNER_ZONES`, one template per private subnet). AwaitRunner writes the start
message (with its task token) to that key and waits at most that long for the runner on the instance
to answer it: the instance's start, boot and image pull. A runner that is not up in time ends the
execution `QueueTimeout`, naming the setting. RunJob then writes the job (with a new task token) to
the same key and waits; the runner reads it, sends heartbeats and answers with success or failure.
Every outcome after Launch - success, runner failure, queue timeout, heartbeat timeout, task timeout -
passes through a terminate step. A terminate step that exhausts its retries ends the execution
FAILED (`TerminateFailed`), and the cleanup machine, started for every FAILED, ABORTED and TIMED_OUT
execution, terminates the instance (stacks/constructs/runner_cleanup.py). An execution aborted or timed out as
a whole cannot run a state: its runner's next heartbeat is refused, the runner exits and the
instance shuts itself down (shutdown behaviour: terminate), and a hard stop in the user data bounds
the instance's life.

The workflow lives in the global stack, which deploys before the runner stack: it names the launch
template and the instance role by their fixed names (`RunnerNames`) and may launch only into
resources tagged as this deployment's, so the runner stack can change without touching it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from gco.validation.settings import QUEUE_TIMEOUT
from gpu_runner.job import JOB_FIELD, SETTINGS_FIELD, STARTED_FIELD
from stacks.config import DEPLOYMENT_TAG, GcoConfig
from stacks.constructs.iam import managed_role, statement
from stacks.constructs.retained import retained_name

JOB_TAG = "gco-job-key"
RUNNER_TAG = "gco-runner"
THROTTLING = ["Ec2.RequestLimitExceeded", "Ec2.Ec2Exception"]
# Availability Zones the runner may launch in, in order: one launch template per private subnet.
RUNNER_ZONES = 2
# The job message the runner reads (gpu_runner.job.JobMessage.from_wire): the task token, the execution
# name and the state input as JSON, separated by spaces (no literal braces to escape).
JOB_MESSAGE = "{} {} {}"
# Where the queue timeout is read from and kept. TimeoutSecondsPath is "a reference path to a positive
# integer in the state input", and a Task may not also set TimeoutSeconds (AWS Step Functions Developer
# Guide, "Task workflow state"); Step Functions' timeouts go up to 99999999 seconds.
QUEUE_TIMEOUT_PATH = f"$.{JOB_FIELD}.{SETTINGS_FIELD}.{QUEUE_TIMEOUT}"
QUEUE = "$.queue"
MAX_TIMEOUT_SECONDS = 99_999_999
# Step Functions' log delivery and X-Ray calls take no resource-level permissions.
LOG_DELIVERY = [
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
]
XRAY = [
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
]


@dataclass(frozen=True)
class RunnerNames:
    """The fixed names by which the global stack's workflow and the runner stack find each other."""

    workflow: str
    cleanup: str
    launch_templates: tuple[str, ...]
    instance_role: str
    deployment: str

    @classmethod
    def of(cls, config: GcoConfig) -> RunnerNames:
        return cls(
            workflow=config.name("gpu-runner"),
            cleanup=config.name("gpu-runner-cleanup"),
            launch_templates=tuple(
                config.name("runner", *([str(zone)] if zone > 1 else []))
                for zone in range(1, RUNNER_ZONES + 1)
            ),
            instance_role=config.name("runner", config.home_region),
            deployment=config.prefix,
        )


class RunnerWorkflow(Construct):
    """The state machine and its role; every permission names the resources it acts on."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        names: RunnerNames,
        instance_types: list[str],
        bucket: s3.IBucket,
        key: kms.IKey,
        log_key: kms.IKey,
        heartbeat: Duration,
        boot: Duration,
        timeout: Duration,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        name = names.workflow

        def arn(resource: str, resource_name: str, account: str | None = None) -> str:
            return stack.format_arn(
                service="ec2", resource=resource, resource_name=resource_name, account=account
            )

        job_key = sfn.JsonPath.format("jobs/{}.json", sfn.JsonPath.execution_name)
        self.role, self.policy = managed_role(
            self,
            "Role",
            role_name=f"{name}-{stack.region}",
            service="states.amazonaws.com",
            description="gco GPU runner workflow: start, hand a job to and terminate its own instances",
            statements=[
                statement(
                    "LaunchFromOwnTemplate",
                    ["ec2:RunInstances"],
                    [arn("launch-template", "*")],
                    StringEquals={f"aws:ResourceTag/{RUNNER_TAG}": name},
                ),
                statement(
                    "LaunchIntoOwnNetwork",
                    ["ec2:RunInstances"],
                    [arn("subnet", "*"), arn("security-group", "*")],
                    StringEquals={f"aws:ResourceTag/{DEPLOYMENT_TAG}": names.deployment},
                ),
                statement(
                    "LaunchTaggedRunner",
                    ["ec2:RunInstances"],
                    [arn("instance", "*")],
                    StringEquals={
                        f"aws:RequestTag/{RUNNER_TAG}": name,
                        "ec2:InstanceType": instance_types if len(instance_types) > 1 else instance_types[0],
                    },
                ),
                statement(
                    "LaunchVolumesAndInterfaces",
                    ["ec2:RunInstances"],
                    [arn("volume", "*"), arn("network-interface", "*"), arn("image", "*", account="")],
                ),
                statement(
                    "TagAtLaunch",
                    ["ec2:CreateTags"],
                    [arn("instance", "*"), arn("volume", "*")],
                    StringEquals={"ec2:CreateAction": "RunInstances"},
                ),
                statement(
                    "TerminateOwnInstances",
                    ["ec2:TerminateInstances"],
                    [arn("instance", "*")],
                    StringEquals={f"aws:ResourceTag/{RUNNER_TAG}": name},
                ),
                statement(
                    "PassInstanceRole",
                    ["iam:PassRole"],
                    [
                        stack.format_arn(
                            service="iam", region="", resource="role", resource_name=names.instance_role
                        )
                    ],
                    StringEquals={"iam:PassedToService": "ec2.amazonaws.com"},
                ),
                statement("WriteJobs", ["s3:PutObject"], [bucket.arn_for_objects("jobs/*")]),
                statement("BucketKey", ["kms:GenerateDataKey", "kms:Decrypt"], [key.key_arn]),
                statement("LogDelivery", LOG_DELIVERY, ["*"]),
                statement("Tracing", XRAY, ["*"]),
            ],
        )
        # The preferred type in every zone, then the next type in every zone: EC2's "insufficient
        # capacity" is per type and zone.
        launches = [
            self._launch(
                launch_state(zone, rank), template, instance_type, name=name, job_key=job_key, arn=arn
            )
            for rank, instance_type in enumerate(instance_types, start=1)
            for zone, template in enumerate(names.launch_templates, start=1)
        ]
        # The runner answers the start message once it is up; it has until the queue timeout.
        await_runner = self._handover(
            "AwaitRunner", bucket, job_key, timeout=sfn.Timeout.at(f"{QUEUE}.seconds"), result=STARTED_FIELD
        )
        run_job = self._handover(
            "RunJob", bucket, job_key, timeout=sfn.Timeout.duration(timeout), result="result",
            heartbeat=sfn.Timeout.duration(heartbeat),
        )  # fmt: skip
        terminate_ok, terminate_failed, terminate_queue = (
            terminate_instances(
                self, state, instance_ids="$.instance.InstanceIds", instance_arn=arn("instance", "*")
            )
            for state in ("TerminateAfterSuccess", "TerminateAfterFailure", "TerminateAfterQueueTimeout")
        )
        # Retries exhausted: the execution fails, and its FAILED status starts the cleanup machine.
        not_terminated = sfn.Fail(
            self,
            "TerminateFailed",
            state_name="TerminateFailed",
            error="TerminateFailed",
            cause_path=sfn.JsonPath.format(
                "{}: {}",
                sfn.JsonPath.string_at("$.terminateError.Error"),
                sfn.JsonPath.string_at("$.terminateError.Cause"),
            ),
        )
        for terminate in (terminate_ok, terminate_failed, terminate_queue):
            terminate.add_catch(not_terminated, errors=["States.ALL"], result_path="$.terminateError")
        await_runner.add_catch(terminate_queue, errors=["States.Timeout"], result_path="$.error")
        for handover in (await_runner, run_job):
            handover.add_catch(terminate_failed, errors=["States.ALL"], result_path="$.error")
        # A fixed error name (a path to "States.*" names is refused), the cause naming the original error.
        failed = sfn.Fail(
            self,
            "RunnerFailed",
            state_name="RunnerFailed",
            error="RunnerFailed",
            cause_path=sfn.JsonPath.format(
                "{}: {}", sfn.JsonPath.string_at("$.error.Error"), sfn.JsonPath.string_at("$.error.Cause")
            ),
        )
        queue_timed_out = sfn.Fail(
            self,
            "QueueTimeout",
            state_name="QueueTimeout",
            error="QueueTimeout",
            cause_path=sfn.JsonPath.format(
                "no runner was up within {} ({} s) of its launch: no GPU capacity came, or the instance did "
                "not start; it was terminated",
                sfn.JsonPath.string_at(f"{QUEUE}.field"),
                sfn.JsonPath.string_at(f"{QUEUE}.seconds"),
            ),
        )
        succeeded = sfn.Succeed(self, "Done", state_name="Done", output_path="$.result")
        launch_failed = sfn.Fail(
            self,
            "LaunchFailed",
            state_name="LaunchFailed",
            error="LaunchFailed",
            cause="the GPU instance could not be started",
        )
        # A zone that refuses the launch passes it to the next; nothing was started there.
        for launch, fallback in zip(launches, [*launches[1:], launch_failed], strict=True):
            launch.add_catch(fallback, errors=["States.ALL"], result_path="$.error")
        definition = self._queue_timeout(boot, launches[0])
        launches[0].next(await_runner).next(run_job).next(terminate_ok).next(succeeded)
        for launch in launches[1:]:
            launch.next(await_runner)
        terminate_failed.next(failed)
        terminate_queue.next(queue_timed_out)
        self.state_machine = logged_state_machine(
            self,
            name=name,
            role=self.role,
            policy=self.policy,
            definition=definition,
            timeout=timeout.plus(Duration.hours(1)),
            log_key=log_key,
            log_retention=log_retention,
        )

    def _handover(
        self,
        state: str,
        bucket: s3.IBucket,
        job_key: str,
        *,
        timeout: sfn.Timeout,
        result: str,
        heartbeat: sfn.Timeout | None = None,
    ) -> tasks.CallAwsService:
        """Write the execution's input with a task token to the job key and wait for the runner's answer,
        kept at `$.<result>`."""
        return tasks.CallAwsService(
            self,
            state,
            state_name=state,
            service="s3",
            action="putObject",
            iam_action="s3:PutObject",
            iam_resources=[bucket.arn_for_objects("jobs/*")],
            integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
            heartbeat_timeout=heartbeat,
            task_timeout=timeout,
            parameters={
                "Bucket": bucket.bucket_name,
                "Key": job_key,
                "ContentType": "text/plain",
                "Body": sfn.JsonPath.format(
                    JOB_MESSAGE,
                    sfn.JsonPath.task_token,
                    sfn.JsonPath.execution_name,
                    sfn.JsonPath.json_to_string(sfn.JsonPath.object_at("$")),
                ),
            },
            result_path=f"$.{result}",
        )

    def _queue_timeout(self, boot: Duration, launch: sfn.IChainable) -> sfn.Choice:
        """Keep at `QUEUE` how long the runner may take to be up, and the name of what set it: the job's
        queue timeout when it has one (refused before anything starts when it is not a whole number of
        seconds Step Functions accepts), else the deployment's boot allowance."""
        field = f"{JOB_FIELD}.{SETTINGS_FIELD}.{QUEUE_TIMEOUT}"
        from_settings = sfn.Pass(
            self,
            "QueueFromSettings",
            state_name="QueueFromSettings",
            parameters={
                "seconds.$": QUEUE_TIMEOUT_PATH,
                "field": QUEUE_TIMEOUT,
                # The Choice rules have no integer test: a whole number is written without a point.
                "parts": sfn.JsonPath.array_length(
                    sfn.JsonPath.string_split(
                        sfn.JsonPath.format("{}", sfn.JsonPath.string_at(QUEUE_TIMEOUT_PATH)), "."
                    )
                ),
            },
            result_path=QUEUE,
        )
        from_deployment = sfn.Pass(
            self,
            "QueueFromDeployment",
            state_name="QueueFromDeployment",
            parameters={"seconds": int(boot.to_seconds()), "field": "the runner's boot_seconds"},
            result_path=QUEUE,
        )
        refused = sfn.Fail(
            self,
            "BadQueueTimeout",
            state_name="BadQueueTimeout",
            error="BadQueueTimeout",
            cause=f"{field} must be a whole number of seconds from 1 to {MAX_TIMEOUT_SECONDS}",
        )
        valid = sfn.Condition.and_(
            sfn.Condition.is_numeric(QUEUE_TIMEOUT_PATH),
            sfn.Condition.number_greater_than_equals(QUEUE_TIMEOUT_PATH, 1),
            sfn.Condition.number_less_than_equals(QUEUE_TIMEOUT_PATH, MAX_TIMEOUT_SECONDS),
        )
        whole = sfn.Choice(self, "WholeSeconds", state_name="WholeSeconds")
        whole.when(sfn.Condition.number_equals(f"{QUEUE}.parts", 1), launch).otherwise(refused)
        from_settings.next(whole)
        from_deployment.next(launch)
        return (
            sfn.Choice(self, "ReadQueueTimeout", state_name="ReadQueueTimeout")
            .when(sfn.Condition.is_not_present(QUEUE_TIMEOUT_PATH), from_deployment)
            .when(valid, from_settings)
            .otherwise(refused)
        )

    def _launch(
        self,
        state: str,
        template: str,
        instance_type: str,
        *,
        name: str,
        job_key: str,
        arn: Callable[..., str],
    ) -> tasks.CallAwsService:
        """RunInstances of one type from one zone's launch template, tagged with the job key and the
        workflow. Its client token is a digest of the execution's name and the state's: a retried
        call (throttling, a lost answer) returns the instance the first call started instead of
        starting a second (EC2's idempotency, "Ensure idempotency in Amazon EC2 API requests"); it
        is 40 hex characters, within EC2's 64."""
        launch = tasks.CallAwsService(
            self,
            state,
            state_name=state,
            service="ec2",
            action="runInstances",
            iam_resources=[arn("instance", "*")],
            parameters={
                "LaunchTemplate": {"LaunchTemplateName": template, "Version": "$Latest"},
                "InstanceType": instance_type,
                "ClientToken": sfn.JsonPath.hash(
                    sfn.JsonPath.format("{}/" + state, sfn.JsonPath.execution_name), "SHA-1"
                ),
                "MinCount": 1,
                "MaxCount": 1,
                "TagSpecifications": [
                    {
                        "ResourceType": "instance",
                        "Tags": [{"Key": JOB_TAG, "Value": job_key}, {"Key": RUNNER_TAG, "Value": name}],
                    }
                ],
            },
            result_selector={"InstanceIds": sfn.JsonPath.list_at("$.Instances[*].InstanceId")},
            result_path="$.instance",
        )
        return with_backoff(launch, THROTTLING, max_attempts=5)


def launch_state(zone: int, rank: int) -> str:
    """The state launching the `rank`-th instance type in `zone`: Launch, LaunchZone2, LaunchType2,
    LaunchZone2Type2, ..."""
    return "Launch" + (f"Zone{zone}" if zone > 1 else "") + (f"Type{rank}" if rank > 1 else "")


def with_backoff(task: tasks.CallAwsService, errors: list[str], *, max_attempts: int) -> tasks.CallAwsService:
    """Retry `errors` from 5 s, doubling, with full jitter (AWS's advice for throttled APIs)."""
    task.add_retry(
        errors=errors,
        interval=Duration.seconds(5),
        backoff_rate=2,
        max_attempts=max_attempts,
        jitter_strategy=sfn.JitterType.FULL,
    )
    return task


def terminate_instances(
    scope: Construct, state: str, *, instance_ids: str, instance_arn: str
) -> tasks.CallAwsService:
    """Terminate the instances listed at the `instance_ids` path; every error is retried."""
    task = tasks.CallAwsService(
        scope,
        state,
        state_name=state,
        service="ec2",
        action="terminateInstances",
        iam_resources=[instance_arn],
        parameters={"InstanceIds": sfn.JsonPath.list_at(instance_ids)},
        result_path=sfn.JsonPath.DISCARD,
    )
    return with_backoff(task, ["States.ALL"], max_attempts=8)


def logged_state_machine(
    scope: Construct,
    *,
    name: str,
    role: iam.Role,
    policy: iam.ManagedPolicy,
    definition: sfn.IChainable,
    timeout: Duration,
    log_key: kms.IKey,
    log_retention: logs.RetentionDays,
) -> sfn.StateMachine:
    """A named, traced state machine logging to its own encrypted log group, without execution data
    (inputs carry task tokens); created after its role's policy so its first execution is allowed."""
    log_group = logs.LogGroup(
        scope,
        "Logs",
        log_group_name=retained_name(scope, f"/aws/vendedlogs/states/{name}"),
        retention=log_retention,
        encryption_key=log_key,
    )
    machine = sfn.StateMachine(
        scope,
        "StateMachine",
        state_machine_name=name,
        role=role.without_policy_updates(),
        definition_body=sfn.DefinitionBody.from_chainable(definition),
        timeout=timeout,
        tracing_enabled=True,
        logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
    )
    machine.node.add_dependency(policy)
    return machine
