"""API Gateway's CloudWatch Logs role of the account in each Region (stacks/constructs/api_account.py):
the Regional stack sets it before the front door's stage (whose access logs need it), keeps it on
delete, and lets it write only to the Region's log groups; `existing` leaves the account as it is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gco.front_door import logging_role_name
from stacks.constructs.api_account import LOG_ACTIONS
from tests.cdk.synth_cache import HOME, OTHER, Synthesized
from tests.cdk.test_deploy_options import options_app
from tests.cdk.test_runner import render


def of_type(template: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def test_each_region_sets_its_logging_role_before_its_stage(synthesized: Synthesized) -> None:
    for region in (HOME, OTHER):
        template = synthesized.template_json(f"gco-regional-{region}")
        ((account_id, account),) = of_type(template, "AWS::ApiGateway::Account").items()
        role_id = account["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0]
        role = template["Resources"][role_id]
        assert role["DeletionPolicy"] == role["UpdateReplacePolicy"] == "Retain"
        (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Principal"] == {"Service": "apigateway.amazonaws.com"}
        name = render(role["Properties"]["RoleName"])
        assert name.startswith(f"{logging_role_name('gco', region)}-"), name
        # The front door's stage and, with a global address, the global API's: each logs, each waits.
        stages = of_type(template, "AWS::ApiGateway::Stage")
        assert len(stages) == 2
        for stage_id, stage in stages.items():
            assert "AccessLogSetting" in stage["Properties"]
            assert account_id in stage["DependsOn"], f"{stage_id} may be created before the account setting"
        ((policy_id, policy),) = [
            (k, p)
            for k, p in of_type(template, "AWS::IAM::ManagedPolicy").items()
            if {"Ref": role_id} in p["Properties"].get("Roles", [])
        ]
        # Kept with the role: a deleted policy would leave the account's setting naming a role that
        # may write nothing.
        assert policy["DeletionPolicy"] == "Retain"
        (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
        assert statement["Action"] == LOG_ACTIONS
        resources = [render(r) for r in statement["Resource"]]
        assert resources == [
            f"arn:aws:logs:{region}:ACCOUNT:log-group:*",
            f"arn:aws:logs:{region}:ACCOUNT:log-group:*:log-stream:*",
        ]
        assert policy_id in account["DependsOn"], "the setting is made once the role may write"


def test_existing_leaves_the_account_setting_alone() -> None:
    from aws_cdk.assertions import Template

    template = Template.from_stack(options_app().regional[OTHER]).to_json()
    assert of_type(template, "AWS::ApiGateway::Account") == {}
    assert not any(
        "api-gateway-logs" in render(r["Properties"].get("RoleName", ""))
        for r in of_type(template, "AWS::IAM::Role").values()
    )
