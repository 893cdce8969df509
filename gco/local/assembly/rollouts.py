"""The global stack's rollout wing in the local stack: a table write with a rollout request starts the
rollout state machine, whose steps are the rollout functions, all from the synthesized app.

- The starter runs from its asset under its role, fed by its synthesized stream mapping (the caller's
  poller: batch size, filters, retries) over the local table's stream; it calls StartExecution on
  `AWS_ENDPOINT_URL_SFN`, the local Step Functions stand-in (gco.local.assembly.stepfunctions).
- The stand-in hosts the rollout state machine under its synthesized name, its definition the
  template's, resolved against the local stack: its tasks invoke the rollout functions, each from its
  asset under its role (gco.local.assembly.states interprets the definition).
- The rollout functions find each Region's way in as in AWS, from the Regional stacks' `InvokeUrl`
  output (CloudFormation DescribeStacks): `up` makes a stack of that name in the moto server, in each
  Region, holding only that output (`regional_outputs_stack`). Their TLS trusts the local proxies'
  certificate (`GCO_INVOKE_CA_BUNDLE`), which stands in for the front doors' public one.

Names the template gives by `Ref` are the local stack's: the endpoint table, and every bucket of the
stack as the one evidence bucket the local stack made.

Not modelled: the state machine's own role (a task invokes its function whatever the role allows),
the EventBridge rule that gives up an execution ended ABORTED or TIMED_OUT (the stand-in has no
StopExecution and no execution timeout), and the GPU runner's state machines (they launch EC2
instances: not run locally).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gco.front_door import INVOKE_URL_OUTPUT, global_stack_name
from gco.inference.invoke import INVOKE_CA_BUNDLE_ENV
from gco.local.assembly.deployed import DeployedApp, DeployedFunction
from gco.local.assembly.regional import STREAM_ATTRIBUTE, stream_mapping
from gco.local.assembly.resolve import ACCOUNT, Resolver
from gco.local.assembly.states import StateMachine
from gco.local.assembly.stepfunctions import StepFunctionsStandIn
from gco.local.assembly.template import EventSourceMapping, function_arns, functions, mappings, state_machines
from gco.local.errors import AssemblyError

TABLE_TYPE = "AWS::DynamoDB::GlobalTable"
BUCKET_TYPE = "AWS::S3::Bucket"
SFN_ENDPOINT_ENV = "AWS_ENDPOINT_URL_SFN"  # botocore's service-specific endpoint variable for Step Functions
STATE_MACHINE_ARN = ":stateMachine:"  # in a state machine's ARN
PLACEHOLDER_TYPE = "AWS::CloudFormation::WaitConditionHandle"  # a resource CloudFormation creates as nothing


def regional_outputs_stack(cloudformation: Any, stack_name: str, invoke_url: str) -> None:
    """A stack named as the Region's Regional stack in the moto server, holding only its `InvokeUrl`
    output (the one thing of it the rollout functions read), made anew if one is there."""
    template = {
        "Resources": {"Placeholder": {"Type": PLACEHOLDER_TYPE}},
        "Outputs": {INVOKE_URL_OUTPUT: {"Value": invoke_url}},
    }
    existing = cloudformation.list_stacks(StackStatusFilter=["CREATE_COMPLETE"])["StackSummaries"]
    if any(summary["StackName"] == stack_name for summary in existing):
        cloudformation.delete_stack(StackName=stack_name)
    cloudformation.create_stack(StackName=stack_name, TemplateBody=json.dumps(template))


def _one(found: list[Any], what: str, stack: str) -> Any:
    if len(found) != 1:
        raise AssemblyError(f"{stack}: {len(found)} {what}, the local stack runs exactly one")
    return found[0]


@dataclass
class RolloutWing:
    """The starter and the rollout state machine, running (see the module's docstring)."""

    starter: DeployedFunction
    mapping: EventSourceMapping
    steps: dict[str, DeployedFunction]
    states: StepFunctionsStandIn
    machine_arn: str

    def starter_handler(self, event: dict[str, Any], _context: Any) -> dict[str, Any]:
        """The mapping's invocation of the starter (its partial batch response)."""
        answer = self.starter.invoke(event)
        return answer if isinstance(answer, dict) else {"batchItemFailures": []}

    def close(self) -> None:
        self.states.stop()
        self.starter.close()
        for step in self.steps.values():
            step.close()


def start_rollouts(
    app: DeployedApp, home: str, *, table: str, stream_arn: str, bucket: str, ca_bundle: str | None
) -> RolloutWing:
    """Read the global stack and start its rollout wing (the module's docstring).

    Raises:
        AssemblyError: the stack has not one starter mapping, one rollout state machine, or a
            definition naming a function it does not have.
    """
    stack = app.assembly.stack(global_stack_name())
    tables = [k for k, r in stack.resources(TABLE_TYPE).items() if r["Properties"].get("TableName") == table]
    table_id = _one(tables, f"tables named {table}", stack.name)
    refs = {table_id: table, **dict.fromkeys(stack.resources(BUCKET_TYPE), bucket)}
    arns = function_arns(stack, ACCOUNT)
    resolver = Resolver(
        region=home,
        stack=stack.name,
        refs=refs,
        attributes={**arns, (table_id, STREAM_ATTRIBUTE): stream_arn},
    )
    mapping = stream_mapping(mappings(stack), stack.name)
    starter_function = functions(stack)[mapping.function]
    # the machine the starter starts: the state machine ARN its environment names
    named_machines = [
        str(value)
        for value in resolver.resolve(starter_function.environment).values()
        if STATE_MACHINE_ARN in str(value)
    ]
    machine_arn: str = _one(named_machines, "state machines in the starter's environment", stack.name)
    name = machine_arn.rsplit(":", 1)[1]
    definition = json.loads(resolver.resolve(state_machines(stack)[name], "DefinitionString"))
    states = StepFunctionsStandIn().start()
    try:
        extra = {SFN_ENDPOINT_ENV: states.url, **({INVOKE_CA_BUNDLE_ENV: ca_bundle} if ca_bundle else {})}
        named = json.dumps(definition)
        steps = {
            arns[(logical_id, "Arn")]: DeployedFunction(app, stack, function, home, resolver, extra)
            for logical_id, function in functions(stack).items()
            if arns[(logical_id, "Arn")] in named
        }
        starter = DeployedFunction(app, stack, starter_function, home, resolver, extra)
    except BaseException:
        states.stop()
        raise
    states.add(machine_arn, StateMachine(definition, _invoker(steps)))
    return RolloutWing(starter, mapping, steps, states, machine_arn)


def _invoker(steps: Mapping[str, DeployedFunction]) -> Any:
    def invoke(arn: str, payload: Any) -> Any:
        if arn not in steps:
            raise AssemblyError(f"the rollout machine's task names {arn}, no function of the stack")
        return steps[arn].invoke(payload)

    return invoke
