"""The Lambda functions and event source mappings a stack's template declares, as the local stack
runs them.

Read from the CloudFormation resource properties (AWS::Lambda::Function and
AWS::Lambda::EventSourceMapping in the CloudFormation User Guide's resource reference), with the
service's defaults where a property is absent: a timeout of 3 s and 128 MB (Lambda's
CreateFunction), a batch size of 100 for DynamoDB and Kinesis, no batching window, a
parallelization factor of 1 and retries until the record expires (-1) (CreateEventSourceMapping).
Scheduled EventBridge rules (`AWS::Events::Rule` with a `ScheduleExpression`) give the functions
invoked on a schedule, with the event EventBridge sends them (`scheduled_event`).
Values that are still CloudFormation expressions (`Ref`, `Fn::GetAtt`, `Fn::Join`) are kept as they
are: the local stack resolves them against what it created.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gco.local.assembly.reader import StackArtifact
from gco.local.errors import AssemblyError

FUNCTION_TYPE = "AWS::Lambda::Function"
MAPPING_TYPE = "AWS::Lambda::EventSourceMapping"
DEFAULT_TIMEOUT_S = 3
DEFAULT_MEMORY_MB = 128
DEFAULT_BATCH_SIZE = 100
UNTIL_EXPIRED = -1


@dataclass(frozen=True)
class LambdaFunction:
    """One function: where its code is, what it runs, with what.

    `code` is the asset folder (None for inline code, `inline`), `handler` the template's
    `module.attribute`, `environment` its variables as the template writes them (tokens unresolved).
    """

    stack: str
    logical_id: str
    name: Any
    handler: str
    runtime: str
    code: Path | None
    inline: str | None
    environment: dict[str, Any] = field(default_factory=dict)
    timeout_s: int = DEFAULT_TIMEOUT_S
    memory_mb: int = DEFAULT_MEMORY_MB
    reserved_concurrency: int | None = None
    role: Any = None

    @property
    def is_python(self) -> bool:
        return self.runtime.startswith("python")

    @property
    def handler_module(self) -> str:
        return self.handler.rsplit(".", 1)[0]

    @property
    def handler_attribute(self) -> str:
        return self.handler.rsplit(".", 1)[1]

    def handler_file(self) -> Path | None:
        """The file of the handler's module in the asset (`a/b.py` or `a/b/__init__.py`), or None when
        the asset has none: Lambda would fail the function's first invocation with
        Runtime.ImportModuleError."""
        if self.code is None:
            return None
        base = self.code.joinpath(*self.handler_module.split("."))
        for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None


@dataclass(frozen=True)
class EventSourceMapping:
    """One event source mapping: its source, its function (a logical id), how it batches and retries,
    and its filters (parsed patterns)."""

    stack: str
    logical_id: str
    function: str
    source: Any
    starting_position: str | None
    batch_size: int = DEFAULT_BATCH_SIZE
    batching_window_s: int = 0
    parallelization_factor: int = 1
    retry_attempts: int = UNTIL_EXPIRED
    bisect_on_error: bool = False
    maximum_record_age_s: int = UNTIL_EXPIRED
    on_failure: Any = None
    report_item_failures: bool = False
    filters: tuple[dict[str, Any], ...] = ()
    enabled: bool = True


def _code(stack: StackArtifact, logical_id: str, code: dict[str, Any]) -> tuple[Path | None, str | None]:
    if "ZipFile" in code:
        inline = code["ZipFile"]
        return None, inline if isinstance(inline, str) else json.dumps(inline)
    key = code.get("S3Key")
    if not isinstance(key, str):
        raise AssemblyError(
            f"{stack.name}/{logical_id}: its code is not a file asset ({json.dumps(code)[:200]})"
        )
    return stack.assets.path_of_key(key), None


def functions(stack: StackArtifact) -> dict[str, LambdaFunction]:
    """The stack's functions by logical id.

    Raises:
        AssemblyError: a function's code is neither inline nor a file asset of the assembly.
    """
    found: dict[str, LambdaFunction] = {}
    for logical_id, resource in stack.resources(FUNCTION_TYPE).items():
        props = resource.get("Properties", {})
        code, inline = _code(stack, logical_id, props.get("Code", {}))
        found[logical_id] = LambdaFunction(
            stack=stack.name,
            logical_id=logical_id,
            name=props.get("FunctionName"),
            handler=str(props.get("Handler", "")),
            runtime=str(props.get("Runtime", "")),
            code=code,
            inline=inline,
            environment=dict(props.get("Environment", {}).get("Variables", {})),
            timeout_s=int(props.get("Timeout", DEFAULT_TIMEOUT_S)),
            memory_mb=int(props.get("MemorySize", DEFAULT_MEMORY_MB)),
            reserved_concurrency=props.get("ReservedConcurrentExecutions"),
            role=props.get("Role"),
        )
    return found


def _function_of(stack: StackArtifact, logical_id: str, name: Any) -> str:
    if isinstance(name, dict) and isinstance(name.get("Ref"), str):
        return str(name["Ref"])
    raise AssemblyError(f"{stack.name}/{logical_id}: FunctionName is not a Ref to a function of the stack")


def mappings(stack: StackArtifact) -> dict[str, EventSourceMapping]:
    """The stack's event source mappings by logical id, filters parsed.

    Raises:
        AssemblyError: a mapping's function is not named by a `Ref`, or a filter is not JSON.
    """
    found: dict[str, EventSourceMapping] = {}
    for logical_id, resource in stack.resources(MAPPING_TYPE).items():
        props = resource.get("Properties", {})
        try:
            patterns = tuple(
                json.loads(f["Pattern"]) for f in props.get("FilterCriteria", {}).get("Filters", [])
            )
        except (ValueError, KeyError, TypeError) as error:
            raise AssemblyError(
                f"{stack.name}/{logical_id}: a filter is not a JSON pattern ({error})"
            ) from error
        found[logical_id] = EventSourceMapping(
            stack=stack.name,
            logical_id=logical_id,
            function=_function_of(stack, logical_id, props.get("FunctionName")),
            source=props.get("EventSourceArn"),
            starting_position=props.get("StartingPosition"),
            batch_size=int(props.get("BatchSize", DEFAULT_BATCH_SIZE)),
            batching_window_s=int(props.get("MaximumBatchingWindowInSeconds", 0)),
            parallelization_factor=int(props.get("ParallelizationFactor", 1)),
            retry_attempts=int(props.get("MaximumRetryAttempts", UNTIL_EXPIRED)),
            bisect_on_error=bool(props.get("BisectBatchOnFunctionError", False)),
            maximum_record_age_s=int(props.get("MaximumRecordAgeInSeconds", UNTIL_EXPIRED)),
            on_failure=props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination"),
            report_item_failures="ReportBatchItemFailures" in props.get("FunctionResponseTypes", []),
            filters=patterns,
            enabled=bool(props.get("Enabled", True)),
        )
    return found


RULE_TYPE = "AWS::Events::Rule"
_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_UNIT_S = {"minute": 60, "hour": 3600, "day": 86400}


@dataclass(frozen=True)
class ScheduledRule:
    """An EventBridge rule on a schedule: its name, how often (seconds; None for a cron expression,
    not modelled), the functions it targets (logical ids) and each target's retry attempts."""

    logical_id: str
    name: str
    expression: str
    every_s: int | None
    targets: tuple[str, ...]
    retry_attempts: int = 185  # EventBridge's default (MaximumRetryAttempts)


def every_seconds(expression: str) -> int | None:
    """The period of a `rate(N unit)` schedule expression (EventBridge's "Schedule expressions for
    rules"); None for `cron(...)`."""
    match = _RATE.match(expression.strip())
    if match is None:
        return None
    return int(match.group(1)) * _UNIT_S[match.group(2).rstrip("s")]


def schedules(stack: StackArtifact) -> dict[str, ScheduledRule]:
    """The stack's scheduled rules that target its functions, by logical id."""
    found: dict[str, ScheduledRule] = {}
    for logical_id, resource in stack.resources(RULE_TYPE).items():
        props = resource.get("Properties", {})
        expression = props.get("ScheduleExpression")
        if not isinstance(expression, str):
            continue  # an event pattern's rule, not a schedule
        targets = []
        attempts = ScheduledRule.retry_attempts
        for target in props.get("Targets", []):
            arn = target.get("Arn")
            if isinstance(arn, Mapping) and isinstance(arn.get("Fn::GetAtt"), list):
                targets.append(str(arn["Fn::GetAtt"][0]))
                attempts = int(target.get("RetryPolicy", {}).get("MaximumRetryAttempts", attempts))
        found[logical_id] = ScheduledRule(
            logical_id=logical_id,
            name=str(props.get("Name", logical_id)),
            expression=expression,
            every_s=every_seconds(expression),
            targets=tuple(targets),
            retry_attempts=attempts,
        )
    return found


def scheduled_event(rule: ScheduledRule, region: str, account: str, time: str) -> dict[str, Any]:
    """The event EventBridge sends a target of a scheduled rule ("Scheduled Event", source
    `aws.events`, the rule's ARN in `resources`)."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": account,
        "time": time,
        "region": region,
        "resources": [f"arn:aws:events:{region}:{account}:rule/{rule.name}"],
        "detail": {},
    }


STATE_MACHINE_TYPE = "AWS::StepFunctions::StateMachine"


def function_arns(stack: StackArtifact, account: str) -> dict[tuple[str, str], str]:
    """`Fn::GetAtt [function, Arn]` of every named function of the stack (for the resolver: a state
    machine's definition and a rule's targets name functions by their ARN).

    Raises:
        AssemblyError: a function's code is neither inline nor a file asset of the assembly.
    """
    found = {}
    for logical_id, function in functions(stack).items():
        name = function.name if isinstance(function.name, str) else logical_id
        found[(logical_id, "Arn")] = f"arn:aws:lambda:{stack.region}:{account}:function:{name}"
    return found


def state_machines(stack: StackArtifact) -> dict[str, Any]:
    """The stack's state machines' definitions by `StateMachineName` (the `DefinitionString` as the
    template writes it, tokens unresolved)."""
    found: dict[str, Any] = {}
    for logical_id, resource in stack.resources(STATE_MACHINE_TYPE).items():
        props = resource.get("Properties", {})
        name = props.get("StateMachineName")
        found[name if isinstance(name, str) else logical_id] = props.get("DefinitionString")
    return found
