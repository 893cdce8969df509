"""Every IAM example in docs/ against the synthesized templates: the stage, the API id's place, the
resource paths and the parameters it names are the ones the stacks create, so a caller who copies an
example gets what the text says instead of a 403.

How a request is authorized: API Gateway builds the request's ARN as
`arn:aws:execute-api:<region>:<account>:<api-id>/<stage>/<METHOD>/<resource path as sent>` and IAM
matches it against each `Resource`, where `*` matches any run of characters, `/` included, and `?` any
one (API Gateway developer guide, "Control access to a REST API with IAM permissions" and its ARN
format for `execute-api`; IAM User Guide, "IAM JSON policy elements: Resource"). `fnmatchcase` has
the same two wildcards.
"""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from typing import Any

import pytest

from gco.reconcile.heartbeat import parameter_arn
from tests.cdk.synth_cache import HOME, OTHER, ROOT, Synthesized
from tests.cdk.test_runner import render, resources_of, runner_statements

DOCS = sorted((ROOT / "docs").glob("*.md"))
EXECUTE_API = re.compile(
    r"^arn:aws:execute-api:(?P<region>[^:]+):(?P<account>\d{12}):(?P<api>[^/]+)/(?P<stage>[^/]+)"
    r"/(?P<method>[^/]+)/(?P<path>.*)$"
)
# The actions the examples below are checked for; a new kind of example needs its own check here.
CHECKED_ACTIONS = {"execute-api:Invoke", "ssm:GetParameter"}


def code_blocks(text: str) -> list[str]:
    """The fenced code blocks of a Markdown text (indented fences too, as in a list item)."""
    blocks: list[str] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if line.strip().startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def iam_examples() -> list[tuple[str, dict[str, Any]]]:
    """(doc file name, statement) for every policy or statement in a code block of docs/*.md."""
    found = []
    for doc in DOCS:
        for block in code_blocks(doc.read_text(encoding="utf-8")):
            try:
                value = json.loads(block)
            except ValueError:
                continue  # not JSON (a shell session, a config fragment)
            if not isinstance(value, dict):
                continue
            statements = value.get("Statement", [value])
            found += [(doc.name, s) for s in statements if isinstance(s, dict) and "Effect" in s]
    return found


def listed(value: str | list[str]) -> list[str]:
    return value if isinstance(value, list) else [value]


def examples_of(action: str) -> list[dict[str, Any]]:
    return [s for _, s in iam_examples() if action in listed(s["Action"])]


def allowed(statement: dict[str, Any], arn: str) -> bool:
    return any(fnmatchcase(arn, pattern) for pattern in listed(statement["Resource"]))


def of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def method_paths(template: dict[str, Any]) -> list[tuple[str, str]]:
    """(HTTP method, resource path) of every method of the Region's REST API, from the resource tree."""
    resources = of_type(template, "AWS::ApiGateway::Resource")

    def path(ref: Any) -> str:
        if isinstance(ref, dict) and "Ref" in ref and ref["Ref"] in resources:
            props = resources[ref["Ref"]]["Properties"]
            return f"{path(props['ParentId'])}/{props['PathPart']}"
        return ""  # the API's root resource

    return [
        (m["Properties"]["HttpMethod"], path(m["Properties"]["ResourceId"]))
        for m in of_type(template, "AWS::ApiGateway::Method").values()
    ]


def test_the_docs_hold_iam_examples_and_each_is_of_a_checked_kind() -> None:
    examples = iam_examples()
    assert len(examples) >= 2, "the one-endpoint policy and the heartbeat read are documented"
    for doc, statement in examples:
        assert set(listed(statement["Action"])) <= CHECKED_ACTIONS, (doc, statement)


def test_the_one_endpoint_policy_names_the_rest_api_s_stage_and_paths(synthesized: Synthesized) -> None:
    template = synthesized.template_json(f"gco-regional-{HOME}")
    # The front door's stage and the global address's (both named alike: the examples name one stage).
    stages = sorted(
        {s["Properties"]["StageName"] for s in of_type(template, "AWS::ApiGateway::Stage").values()}
    )
    assert len(stages) == 1
    (method, proxy_path) = next(p for p in method_paths(template) if p[1].startswith("/inference/"))
    assert (method, proxy_path) == ("ANY", "/inference/{proxy+}")
    prefix = proxy_path.removesuffix("{proxy+}")
    for statement in examples_of("execute-api:Invoke"):
        assert statement["Effect"] == "Allow"
        for arn in listed(statement["Resource"]):
            parts = EXECUTE_API.match(arn)
            assert parts, f"{arn}: not an execute-api ARN of the documented format"
            assert parts["stage"] == stages[0], f"{arn}: stage {parts['stage']!r}, not {stages[0]!r}"
            assert re.fullmatch(r"[a-z0-9]+", parts["api"]), f"{arn}: API id {parts['api']!r}"
            assert parts["method"] == "*" or method == "ANY"
            assert f"/{parts['path']}".startswith(prefix), f"{arn}: not under {prefix}"


def test_the_one_endpoint_policy_allows_its_endpoint_and_nothing_else(synthesized: Synthesized) -> None:
    template = synthesized.template_json(f"gco-regional-{HOME}")
    stage = next(iter(of_type(template, "AWS::ApiGateway::Stage").values()))["Properties"]["StageName"]
    (statement,) = examples_of("execute-api:Invoke")
    parts = EXECUTE_API.match(listed(statement["Resource"])[0])
    assert parts
    base = f"arn:aws:execute-api:{parts['region']}:{parts['account']}:{parts['api']}/{stage}"
    for method, path in [("POST", "/inference/chat/v1/completions"), ("GET", "/inference/chat/health")]:
        assert allowed(statement, f"{base}/{method}{path}"), path
    for refused in [
        f"{base}/POST/inference/other/v1/completions",
        f"{base}/POST/inference/chatty/v1/completions",
        f"{base.removesuffix(stage)}prod/POST/inference/chat/v1/completions",
    ]:
        assert not allowed(statement, refused), refused
    # The example narrows the stack's own policy (InvokePolicyArn): each of its resources lies inside it.
    (policy,) = [
        p
        for p in of_type(template, "AWS::IAM::ManagedPolicy").values()
        if p["Properties"]["ManagedPolicyName"] == f"gco-inference-{HOME}-invoke-{HOME}"
    ]
    (stack_resource,) = listed(policy["Properties"]["PolicyDocument"]["Statement"][0]["Resource"])
    api_ref = {"Ref": next(iter(of_type(template, "AWS::ApiGateway::RestApi")))}
    text = json.dumps(stack_resource).replace(json.dumps(api_ref), json.dumps(parts["api"]))
    pattern = render(json.loads(text)).replace("ACCOUNT", parts["account"])
    for arn in listed(statement["Resource"]):
        assert fnmatchcase(arn, pattern), (arn, pattern)


def test_the_heartbeat_read_names_the_parameter_each_reconciler_writes(synthesized: Synthesized) -> None:
    (statement,) = examples_of("ssm:GetParameter")
    for region in (HOME, OTHER):
        template = synthesized.template_json(f"gco-regional-{region}")
        writes = [
            render(s["Resource"]).replace("ACCOUNT", "111122223333")
            for p in of_type(template, "AWS::IAM::ManagedPolicy").values()
            for s in p["Properties"]["PolicyDocument"]["Statement"]
            if s.get("Sid") == "Heartbeat"
        ]
        expected = parameter_arn(
            partition="aws", region=region, account="111122223333", table="gco-inference-endpoints"
        )
        assert writes == [expected]
        assert allowed(statement, expected), (statement["Resource"], expected)


@pytest.mark.parametrize("doc", ["matrix.md"])
def test_the_runner_s_invoke_row_names_the_runner_s_resources(doc: str, synthesized: Synthesized) -> None:
    row = next(
        line
        for line in (ROOT / "docs" / doc).read_text(encoding="utf-8").splitlines()
        if line.startswith("| `execute-api:Invoke`")
    )
    home_shape, other_shape = re.findall(r"`([^`]*/\*/\*/inference/\*)`", row)
    statements = runner_statements(synthesized.template("gco-runner"))
    home, other = resources_of(statements["InvokeFrontDoors"])
    assert home_shape.startswith("<api-id>/") and home.endswith(home_shape.removeprefix("<api-id>"))
    assert other.endswith(f":{other_shape}")
