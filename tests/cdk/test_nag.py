"""The whole app under all five cdk-nag packs: no unsuppressed finding, few and narrow suppressions."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from stacks.app import NAG_PACKS, nag_findings
from tests.cdk.conftest import Synthesized, iam_statements


def test_no_unsuppressed_nag_error_or_warning(synthesized: Synthesized) -> None:
    assert len(NAG_PACKS) == 5
    assert nag_findings(synthesized.assembly) == []


# CDK's kubectl provider (a handler and a custom-resource framework function per Region, which install
# the cluster add-ons) brings its own roles and functions; their findings are counted apart.
KUBECTL_PROVIDER = "/Eks/Cluster/KubectlProvider/"


def test_suppressions_are_few_specific_and_on_one_resource(synthesized: Synthesized) -> None:
    suppressions = synthesized.gco.suppressions
    provider = [item for item in suppressions if KUBECTL_PROVIDER in item.path]
    front_door = [
        item for item in suppressions if "/FrontDoor/" in item.path or "/LoadBalancerController/" in item.path
    ]
    global_door = [item for item in suppressions if "/GlobalFrontDoor/" in item.path]
    regional = len(synthesized.gco.regional)
    # CDK's own kubectl provider functions (stacks/nag/suppressions_k8s.py).
    assert len(provider) <= 30 * regional
    # The internal ALB behind the API (16), and the streaming REST API's (15: no WAF, no cache, no
    # execution logs, no backend client certificate, no Cognito, no body model;
    # stacks/nag/suppressions_k8s.py).
    assert len(front_door) <= 31 * regional
    # The global address's API and authorizer (25: the REST API's as above, its open health method,
    # the authorizer's DLQ, concurrency and runtime; stacks/nag/global_suppressions.py).
    assert len(global_door) <= 25 * regional
    # The three bundled functions run Python 3.13, not the newest (stacks/bundling.py says why):
    # AwsSolutions-L1 and Serverless-LambdaLatestVersion on each, in each Regional stack.
    runtime = [
        item for item in suppressions if item.rule in ("AwsSolutions-L1", "Serverless-LambdaLatestVersion")
    ]
    # and the rollout state machine's three functions in the global stack (stacks/nag/rollout_suppressions.py)
    rollout = [item for item in suppressions if "/Rollout/" in item.path]
    assert len([item for item in runtime if KUBECTL_PROVIDER not in item.path]) == 6 * regional + 6
    assert len(rollout) <= 25
    # The Container Insights agent's AWS managed policy, per Region (nag/observability_suppressions.py).
    insights = [item for item in suppressions if "/ContainerInsights/" in item.path]
    assert [item.rule for item in insights] == ["AwsSolutions-IAM4"] * regional
    rest = (
        len(suppressions) - len(provider) - len(front_door) - len(global_door) - len(rollout) - len(insights)
    )
    assert rest - 4 * regional <= 45
    for item in suppressions:
        assert (
            item.path.startswith("/gco-") and item.path.endswith("/Resource")
        ) or "DefaultRoute" in item.path
        assert len(item.reason) >= 40
    pairs = Counter((item.path, item.rule) for item in suppressions)
    assert max(pairs.values()) == 1
    assert all(item.applies_to for item in suppressions if item.rule.endswith("IAM5"))


def test_every_stack_is_synthesized(synthesized: Synthesized) -> None:
    names = {stack.stack_name for stack in synthesized.assembly.stacks}
    assert names == {
        "gco-keys-us-west-2",
        "gco-global",
        "gco-regional-us-east-1",
        "gco-regional-us-west-2",
        "gco-runner",
    }


def _templates(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    return {stack.stack_name: dict(stack.template) for stack in synthesized.assembly.stacks}


def test_no_allow_statement_has_a_wildcard_action(synthesized: Synthesized) -> None:
    offenders = [
        (name, owner, action)
        for name, template in _templates(synthesized).items()
        for owner, statement in iam_statements(template)
        if statement["Effect"] == "Allow"
        for action in (
            [statement["Action"]] if isinstance(statement.get("Action"), str) else statement.get("Action", [])
        )
        if "*" in json.dumps(action)
    ]
    assert offenders == []
    assert not any("NotAction" in s for t in _templates(synthesized).values() for _, s in iam_statements(t))


def test_no_inline_iam_policies(synthesized: Synthesized) -> None:
    """Only CDK's kubectl provider writes its grants as role default policies (its two functions)."""
    for template in _templates(synthesized).values():
        inline = sorted(k for k, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Policy")
        assert all(logical_id.startswith("EksClusterKubectlProvider") for logical_id in inline), inline
        assert len(inline) <= 2


def test_named_resources(synthesized: Synthesized) -> None:
    names = {
        "AWS::Lambda::Function": "FunctionName",
        "AWS::SQS::Queue": "QueueName",
        "AWS::SNS::Topic": "TopicName",
        "AWS::CloudWatch::Alarm": "AlarmName",
        "AWS::Events::Rule": "Name",
        "AWS::EKS::Cluster": "Name",
        "AWS::EKS::Nodegroup": "NodegroupName",
        "AWS::IAM::Role": "RoleName",
        "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
        "AWS::StepFunctions::StateMachine": "StateMachineName",
        "AWS::EC2::LaunchTemplate": "LaunchTemplateName",
        "AWS::DynamoDB::GlobalTable": "TableName",
        "AWS::S3::Bucket": "BucketName",
        "AWS::Logs::LogGroup": "LogGroupName",
        "AWS::EC2::SecurityGroup": "GroupName",
        "AWS::IAM::InstanceProfile": "InstanceProfileName",
    }
    unnamed = [
        (stack, logical_id, resource["Type"])
        for stack, template in _templates(synthesized).items()
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] in names
        and names[resource["Type"]] not in resource["Properties"]
        and not logical_id.startswith("EksCluster")  # the EKS construct's own roles and control-plane group
    ]
    assert unnamed == []


def test_every_key_has_an_alias(synthesized: Synthesized) -> None:
    """KMS keys take no name; an alias is how they are named."""
    checked = 0
    for stack, template in _templates(synthesized).items():
        resources = template["Resources"]
        keys = {logical_id for logical_id, r in resources.items() if r["Type"] == "AWS::KMS::Key"}
        aliased = {
            r["Properties"]["TargetKeyId"]["Fn::GetAtt"][0]
            for r in resources.values()
            if r["Type"] == "AWS::KMS::Alias"
        }
        assert keys <= aliased, (stack, keys - aliased)
        checked += len(keys)
    assert checked == 5  # the table keys (home, replica) and the global and two Regional stack keys


def test_log_groups_encrypted_with_retention(synthesized: Synthesized) -> None:
    for template in _templates(synthesized).values():
        for resource in template["Resources"].values():
            if resource["Type"] == "AWS::Logs::LogGroup":
                assert "KmsKeyId" in resource["Properties"] and "RetentionInDays" in resource["Properties"]
