"""API Gateway's CloudWatch Logs role for the account in this Region, which the front door's access
logs need before its stage can be created.

What AWS documents, and what follows:

- The role is a setting of the account, one per Region ("To avoid overwriting other roles, you
  should only have one `AWS::ApiGateway::Account` resource per region per account", CloudFormation
  reference, `AWS::ApiGateway::Account`). A stage with access logging is refused until it is set
  ("CloudWatch Logs role ARN must be set in account settings to enable logging"; API Gateway
  developer guide, "Set up CloudWatch logging for REST APIs": a role that `apigateway.amazonaws.com`
  may assume, with the permissions of `AmazonAPIGatewayPushToCloudWatchLogs`).
- So each Regional stack of a deployment owns its Region's setting (one stack per Region), and only
  when the config says `api_gateway_account: create` (the default): a second deployment in the same
  account and Region, or an account whose setting another tool owns, says `existing`, and
  `gco doctor` checks that the setting is there (and warns before a `create` would replace a role
  that is not gco's).
- Deleting the stack leaves the setting as it is ("When you delete a stack containing this
  resource, API Gateway can still assume the provided IAM role", same reference), and other APIs of
  the Region may log through it by then. So the role and its policy are kept on delete (retain),
  named with the stack creation's suffix so a redeploy makes new ones and sets them.

The role may write only to this account's log groups in this Region: the actions of
`AmazonAPIGatewayPushToCloudWatchLogs` that write (its reads, `GetLogEvents` and `FilterLogEvents`,
are left out), on `log-group:*` of the Region rather than `*`, since execution logs of any API of the
Region create their own groups (`API-Gateway-Execution-Logs_<api>/<stage>`).
"""

from __future__ import annotations

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as restapi
from constructs import Construct

from gco.front_door import logging_role_name
from stacks.constructs.iam import managed_role, statement
from stacks.constructs.retained import retained_name

LOG_ACTIONS = [
    "logs:CreateLogGroup",
    "logs:CreateLogStream",
    "logs:DescribeLogGroups",
    "logs:DescribeLogStreams",
    "logs:PutLogEvents",
]


class ApiGatewayAccount(Construct):
    """The role API Gateway writes logs with, and the account setting (`AWS::ApiGateway::Account`)
    that names it, both kept when the stack is deleted."""

    def __init__(self, scope: Construct, construct_id: str, *, prefix: str) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        name = retained_name(self, logging_role_name(prefix, stack.region))
        log_groups = stack.format_arn(
            service="logs", resource="log-group", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
        )
        self.role, self.policy = managed_role(
            self,
            "Role",
            role_name=name,
            service="apigateway.amazonaws.com",
            description="API Gateway's CloudWatch Logs role of this account and Region (access and "
            "execution logs of its REST APIs)",
            statements=[statement("WriteApiLogs", LOG_ACTIONS, [log_groups, f"{log_groups}:log-stream:*"])],
        )
        for kept in (self.role, self.policy):
            kept.apply_removal_policy(RemovalPolicy.RETAIN)
        self.account = restapi.CfnAccount(self, "Account", cloud_watch_role_arn=self.role.role_arn)
        # The setting is made only once the role may write (API Gateway checks the role when it is set).
        self.account.node.add_dependency(self.policy)
