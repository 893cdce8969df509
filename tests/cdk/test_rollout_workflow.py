"""The rollout state machine in the global stack: every path terminates, every task is bounded and
caught, a failure or an abort leaves the endpoint on the primary, and its roles are least-privilege."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Match

from gco.deployment.event_filter import EventFilterError, check_filters, passes
from gco.endpoints.codec import to_item
from gco.rollout.execution import STATE_MACHINE_ENV
from gco.rollout.service import REQUEST_ATTRIBUTE, STREAM_FILTER
from stacks.constructs.rollout_workflow import ENDED_WITHOUT_VERDICT, EXECUTION_TIMEOUT, STEP_TIMEOUT_S
from stacks.constructs.stream_filter import stream_filters
from tests.cdk.synth_cache import Synthesized, state_machine_definition

NAME = "gco-rollout"
TERMINAL = ("Succeed", "Fail")


def definition(synthesized: Synthesized) -> dict[str, Any]:
    return state_machine_definition(synthesized.template_json("gco-global"), NAME)


def successors(state: dict[str, Any]) -> list[str]:
    found = [state["Next"]] if "Next" in state else []
    found += [choice["Next"] for choice in state.get("Choices", [])]
    found += [state["Default"]] if "Default" in state else []
    found += [catch["Next"] for catch in state.get("Catch", [])]
    return found


def test_every_state_reaches_an_end_and_every_task_is_bounded_and_caught(synthesized: Synthesized) -> None:
    asl = definition(synthesized)
    states = asl["States"]
    assert asl["StartAt"] == "Init"
    # every state is reachable, and from every state an end is reachable (no trap, no dead state)
    reachable, todo = set(), [asl["StartAt"]]
    while todo:
        name = todo.pop()
        if name not in reachable:
            reachable.add(name)
            todo.extend(successors(states[name]))
    assert reachable == set(states)
    ends = {name for name, state in states.items() if state["Type"] in TERMINAL}
    assert ends == {"Promoted", "NotPromoted", "RolloutFailed", "GiveUpFailed"}
    leads_to_end = set(ends)
    for _ in states:
        leads_to_end |= {name for name, state in states.items() if set(successors(state)) & leads_to_end}
    assert leads_to_end == set(states)
    # every task has a timeout and catches everything: Begin and Step into GiveUp, GiveUp into its Fail
    tasks = {name: state for name, state in states.items() if state["Type"] == "Task"}
    assert set(tasks) == {"Begin", "Step", "GiveUp"}
    for task in tasks.values():
        assert task["TimeoutSeconds"] == STEP_TIMEOUT_S + 60
        assert task["Catch"][-1]["ErrorEquals"] == ["States.ALL"]
        assert task["Retry"][0]["MaxAttempts"] == 3 and "States.ALL" not in task["Retry"][0]["ErrorEquals"]
    assert tasks["Begin"]["Catch"][-1]["Next"] == tasks["Step"]["Catch"][-1]["Next"] == "GiveUp"
    assert (
        tasks["GiveUp"]["Next"] == "RolloutFailed" and tasks["GiveUp"]["Catch"][-1]["Next"] == "GiveUpFailed"
    )
    # the loop: a done rollout ends by its verdict, a waiting one waits, any other takes a step
    done = states["Done"]
    assert [c["Next"] for c in done["Choices"]] == ["Verdict", "AwaitCanary"] and done["Default"] == "Step"
    assert states["AwaitCanary"]["Next"] == "Step" and states["Step"]["Next"] == "Done"
    assert states["Verdict"]["Choices"][0]["StringEquals"] == "promoted"
    assert (
        states["Verdict"]["Choices"][0]["Next"] == "Promoted"
        and states["Verdict"]["Default"] == "NotPromoted"
    )
    # what GiveUp reads exists from the first state on (a missing path is an uncatchable States.Runtime)
    assert states["Init"]["ResultPath"] == "$.rollout" and states["Init"]["Result"]["state"] == {}
    assert states["GiveUp"]["Parameters"]["state.$"] == "$.rollout.state"


def test_the_machine_is_bounded_logged_traced(global_template: Any) -> None:
    global_template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "StateMachineName": NAME,
            "TracingConfiguration": {"Enabled": True},
            "LoggingConfiguration": Match.object_like({"Level": "ALL", "IncludeExecutionData": False}),
        },
    )
    asl = json.dumps(global_template.find_resources("AWS::StepFunctions::StateMachine"))
    assert str(int(EXECUTION_TIMEOUT.to_seconds())) in asl


def test_an_execution_ended_without_a_verdict_gives_up(global_template: Any) -> None:
    rules = global_template.find_resources(
        "AWS::Events::Rule", {"Properties": {"Name": "gco-rollout-give-up"}}
    )
    (rule,) = rules.values()
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["source"] == ["aws.states"] and pattern["detail"]["status"] == ENDED_WITHOUT_VERDICT
    assert "GiveUpFunction" in json.dumps(rule["Properties"]["Targets"])


def test_the_stream_starter_is_filtered_to_rollout_requests(global_template: Any) -> None:
    mappings = global_template.find_resources("AWS::Lambda::EventSourceMapping")
    (mapping,) = [m for m in mappings.values() if "StarterFunction" in json.dumps(m)]
    patterns = check_filters(f["Pattern"] for f in mapping["Properties"]["FilterCriteria"]["Filters"])
    # Lambda's filter rules, applied to records as the stream writes them: a request passes, nothing else.
    request = {"endpoint_name": "llama", REQUEST_ATTRIBUTE: {"image": "repo@sha256:1", "waves": True}}
    assert passes({"eventName": "MODIFY", "dynamodb": {"NewImage": to_item(request)}}, patterns)
    other = {"endpoint_name": "llama", "desired_state": "running"}
    assert not passes({"eventName": "MODIFY", "dynamodb": {"NewImage": to_item(other)}}, patterns)
    global_template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "FunctionName": "gco-rollout-starter",
            "Environment": {"Variables": Match.object_like({STATE_MACHINE_ENV: Match.any_value()})},
        },
    )


def test_a_stream_filter_lambda_would_never_match_fails_the_synth() -> None:
    on_the_map = {"dynamodb": {"NewImage": {REQUEST_ATTRIBUTE: {"M": lambda_.FilterRule.exists()}}}}
    with pytest.raises(EventFilterError, match=r"rollout_request\.M: is a map of attributes, not a leaf"):
        stream_filters(on_the_map)
    (made,) = stream_filters(STREAM_FILTER)
    assert json.loads(made["pattern"]) == STREAM_FILTER


def test_the_roles_name_their_actions_and_resources(global_template: Any) -> None:
    policies = global_template.find_resources("AWS::IAM::ManagedPolicy")
    mine = [p for key, p in policies.items() if key.startswith("Rollout")]
    assert len(mine) == 3
    for policy in mine:
        for item in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = item["Action"] if isinstance(item["Action"], list) else [item["Action"]]
            assert all("*" not in action for action in actions), item
    text = json.dumps(mine)
    assert "execute-api:Invoke" in text and "/POST/inference/*" in text
    assert "states:StartExecution" in text and "lambda:InvokeFunction" in text
    assert "dynamodb:DeleteItem" not in text and "dynamodb:Scan" not in text


def test_the_step_role_reads_what_the_canary_s_admission_needs(global_template: Any) -> None:
    """The step function admits the canary's image as the CLI does: the policy parameter, the evidence
    index (with ListBucket: a missing key is then 404, not 403) and private ECR tags."""
    policies = global_template.find_resources("AWS::IAM::ManagedPolicy")
    (step,) = [p for key, p in policies.items() if key.startswith("RolloutStepRolePolicy")]
    by_sid = {item["Sid"]: item for item in step["Properties"]["PolicyDocument"]["Statement"]}
    assert by_sid["ValidationPolicy"]["Action"] == "ssm:GetParameter"
    assert "ValidationPolicy" in json.dumps(by_sid["ValidationPolicy"]["Resource"])
    assert by_sid["EvidenceIndex"]["Action"] == "s3:ListBucket"
    assert "EvidenceBucket" in json.dumps(by_sid["EvidenceIndex"]["Resource"])
    assert by_sid["ResolvePrivateTags"]["Action"] == "ecr:DescribeImages"
    assert ":repository/*" in json.dumps(by_sid["ResolvePrivateTags"]["Resource"])
