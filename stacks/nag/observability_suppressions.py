"""cdk-nag suppressions for what the Regional stack adds for a first deploy and for operators to watch:
API Gateway's CloudWatch Logs role of the account (`stacks/constructs/api_account.py`), and the role of
the Container Insights add-on's agent (`stacks/constructs/observability.py`).

Each is one path, one rule, one reason, and for a wildcard the exact resources (`applies_to`), as in
`stacks/nag/suppressions.py`.
"""

from __future__ import annotations

from aws_cdk import Stack

from gco.deployment.container_insights import AGENT_POLICY
from stacks.nag.suppression import Suppression


def api_account_suppressions(stack: Stack) -> list[Suppression]:
    """The logging role's log-group wildcard, where the stack creates that role."""
    if stack.node.try_find_child("ApiGatewayAccount") is None:
        return []
    logs = f"arn:<AWS::Partition>:logs:{stack.region}:<AWS::AccountId>:log-group:*"
    return [
        Suppression(
            f"/{stack.stack_name}/ApiGatewayAccount/RolePolicy/Resource",
            "AwsSolutions-IAM5",
            "API Gateway's logging role is one setting of the account and Region, shared by every REST "
            "API there: execution logs create a group per API and stage (API-Gateway-Execution-Logs_<api>/"
            "<stage>), unknown here; bounded to this account's log groups in this Region, write actions only",
            (f"Resource::{logs}", f"Resource::{logs}:log-stream:*"),
        )
    ]


def container_insights_suppressions(stack: Stack) -> list[Suppression]:
    """The agent role's one AWS managed policy."""
    return [
        Suppression(
            f"/{stack.stack_name}/ContainerInsights/AgentRole/Resource",
            "AwsSolutions-IAM4",
            f"{AGENT_POLICY} is the one policy the CloudWatch Observability add-on's documentation names for "
            "its agent (Container Insights quick start); AWS keeps it to what the agent calls as the agent "
            "changes (metrics, its performance log groups, EC2 tags and volumes), and the role is assumed "
            "only through this cluster's Pod Identity association of the agent's service account",
            (f"Policy::arn:<AWS::Partition>:iam::aws:policy/{AGENT_POLICY}",),
        )
    ]
