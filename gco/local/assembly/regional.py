"""One Region's Regional stack in the local stack: the reconciler's stream function with its event
source mapping, the sweep with its schedule, and the EKS side of their cluster access.

In two steps, because the cluster's API server needs the authenticator before it starts and the
functions need the API server's URL:

1. `RegionalStack(app, region)` reads the stack: the function its DynamoDB-stream mapping invokes,
   the function its schedule targets, the cluster's name (the stream function's `EKS_CLUSTER_NAME`),
   and `tokens`, the authenticator of EKS tokens the stand-in API server is given: a token's
   presigned GetCallerIdentity checked against the moto server's sessions and mapped to a
   Kubernetes group by the stack's access entries (gco.local.assembly.eks).
2. `start(api_url)` serves `eks:DescribeCluster` for the cluster (answering with the API server's
   URL) and makes both functions (`DeployedFunction`: role, environment, asset), each pointed at
   that stand-in with `AWS_ENDPOINT_URL_EKS`.

The stream the mapping reads is the local table's (one table, in the home Region, stands for the
global table's replicas: each Region's poller reads it, as each replica's mapping reads its own), and
the on-failure destination is the stack's queue, made in the moto server and written to with the
stream function's role's credentials (Lambda sends to it with the function's execution role:
"Lambda event source mappings", on-failure destinations).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gco.env import CLUSTER_NAME_ENV
from gco.front_door import regional_stack_name
from gco.local.assembly.deployed import DeployedApp, DeployedFunction
from gco.local.assembly.eks import DescribeClusterStandIn, IamTokens, access_entries, moto_sessions
from gco.local.assembly.iam import role_arns
from gco.local.assembly.resolve import ACCOUNT, Resolver
from gco.local.assembly.template import (
    EventSourceMapping,
    ScheduledRule,
    functions,
    mappings,
    scheduled_event,
    schedules,
)
from gco.local.errors import AssemblyError
from gco.reconcile.access import RECONCILER_GRANT, RUNNER_GRANT

EKS_ENDPOINT_ENV = "AWS_ENDPOINT_URL_EKS"  # botocore's service-specific endpoint variable for EKS
QUEUE_TYPE = "AWS::SQS::Queue"
MAX_QUEUE_NAME = 80  # SQS's limit on a queue's name
STREAM_SOURCE = ":dynamodb:"  # in a stream mapping's source ARN (the table's stream)
STREAM_ATTRIBUTE = "StreamArn"  # a table's stream as `Fn::GetAtt` names it


def stream_mapping(found: Mapping[str, EventSourceMapping], stack: str) -> EventSourceMapping:
    """The one mapping of a stack whose source is a table's stream.

    Raises:
        AssemblyError: the stack has none, or more than one.
    """
    streams = [
        m for m in found.values() if STREAM_SOURCE in str(m.source) or STREAM_ATTRIBUTE in str(m.source)
    ]
    if len(streams) != 1:
        raise AssemblyError(f"{stack}: {len(streams)} stream mappings, the local stack runs exactly one")
    return streams[0]


class RegionalStack:
    """The Region's stack read, its cluster's authenticator ready (step 1 of the module's docstring).

    Raises:
        AssemblyError: the assembly has no Regional stack for `region`, or not one stream mapping
            and one schedule.
    """

    def __init__(self, app: DeployedApp, region: str) -> None:
        self.app = app
        self.region = region
        self.stack = app.assembly.stack(regional_stack_name(region))
        found = functions(self.stack)
        self.mapping = stream_mapping(mappings(self.stack), self.stack.name)
        rules = list(schedules(self.stack).values())
        if len(rules) != 1 or len(rules[0].targets) != 1:
            raise AssemblyError(f"{self.stack.name}: the local stack runs one schedule with one target")
        self.schedule: ScheduledRule = rules[0]
        self.stream_function = found[self.mapping.function]
        self.sweep_function = found[self.schedule.targets[0]]
        self.resolver = Resolver(region=region, stack=self.stack.name, refs=self._queues())
        self.cluster = str(self.resolver.resolve(self.stream_function.environment)[CLUSTER_NAME_ENV])
        with_roles = Resolver(region=region, stack=self.stack.name, attributes=role_arns(self.stack))
        grants = {grant.group: grant for grant in (RECONCILER_GRANT, RUNNER_GRANT)}
        self.tokens = IamTokens(
            app.moto_url,
            self.cluster,
            access_entries(self.stack, with_roles),
            grants,
            moto_sessions(app.moto_url),
        )

    def _queues(self) -> dict[str, str]:
        """Each queue of the stack by its local name (`Ref` of a queue is its URL; kept as the name)."""
        return {
            logical_id: f"{self.stack.name}-{logical_id}"[:80]
            for logical_id in self.stack.resources(QUEUE_TYPE)
        }

    def on_failure_queue(self) -> str | None:
        """The name of the mapping's on-failure queue (None: it has none)."""
        target = self.mapping.on_failure
        if isinstance(target, Mapping) and isinstance(target.get("Fn::GetAtt"), list):
            logical_id = str(target["Fn::GetAtt"][0])
            if logical_id in self.stack.resources(QUEUE_TYPE):
                return self._queues()[logical_id]
        return None

    def start(self, api_url: str) -> RegionalFunctions:
        """Serve DescribeCluster for the cluster at `api_url` and make both functions (step 2)."""
        eks = DescribeClusterStandIn({self.cluster: api_url}).start()
        try:
            extra = {EKS_ENDPOINT_ENV: eks.url}
            made = [
                DeployedFunction(self.app, self.stack, function, self.region, self.resolver, extra)
                for function in (self.stream_function, self.sweep_function)
            ]
        except BaseException:
            eks.stop()
            raise
        return RegionalFunctions(self, made[0], made[1], eks)


@dataclass
class RegionalFunctions:
    """The Region's functions, running (step 2 of the module's docstring)."""

    stack: RegionalStack
    stream: DeployedFunction
    sweep: DeployedFunction
    eks: DescribeClusterStandIn

    def stream_handler(self, event: dict[str, Any], _context: Any) -> dict[str, Any]:
        """The mapping's invocation of the stream function (its partial batch response)."""
        answer = self.stream.invoke(event)
        return answer if isinstance(answer, dict) else {"batchItemFailures": []}

    def sweep_once(self, now: datetime | None = None) -> Any:
        """One scheduled invocation of the sweep, with the event EventBridge sends.

        Raises:
            FunctionInvokeError: the sweep failed (EventBridge retries it: `retry_attempts`).
        """
        moment = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = scheduled_event(self.stack.schedule, self.stack.region, ACCOUNT, moment)
        return self.sweep.invoke(event)

    def on_failure(self) -> tuple[Any, str] | None:
        """An SQS client with the stream function's role and the on-failure queue's URL (the queue
        made in the moto server), or None when the mapping has no destination."""
        name = self.stack.on_failure_queue()
        if name is None:
            return None
        sqs = self.stack.app.client("sqs", self.stack.region)
        url = str(sqs.create_queue(QueueName=name)["QueueUrl"])
        return self.stream.client("sqs"), url

    def close(self) -> None:
        self.stream.close()
        self.sweep.close()
        self.eks.stop()
