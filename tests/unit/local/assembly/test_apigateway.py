"""API Gateway's side of a REQUEST authorizer (gco.local.assembly.apigateway), with a stand-in function
and an injected clock: identity sources, the answer's protocol, the result cache."""

from __future__ import annotations

from typing import Any

from gco.local.assembly.apigateway import AuthorizerGate, RequestAuthorizer, method_arn, request_event
from gco.local.errors import FunctionInvokeError

ARN = method_arn("us-west-2", "api", "v1", "POST", "/inference/llama")


def policy(effect: str, resource: str = ARN, **context: str) -> dict[str, Any]:
    statement = {"Action": "execute-api:Invoke", "Effect": effect, "Resource": resource}
    return {
        "principalId": "k1",
        "policyDocument": {"Version": "2012-10-17", "Statement": [statement]},
        "context": context,
    }


def event(headers: dict[str, str], path: str = "/inference/llama") -> dict[str, Any]:
    return request_event(
        region="us-west-2", api_id="api", stage="v1", method="POST", path=path, headers=headers
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_request_event_has_api_gateway_s_documented_fields() -> None:
    made = event({"Authorization": "Bearer x"})
    assert made["type"] == "REQUEST" and made["methodArn"] == ARN
    assert made["requestContext"]["path"] == "/v1/inference/llama" and made["requestContext"]["stage"] == "v1"
    assert made["multiValueHeaders"] == {"Authorization": ["Bearer x"]}
    assert made["pathParameters"] == {"proxy": "inference/llama"}


def test_the_function_s_answer_decides_the_status() -> None:
    answers: list[Any] = [
        policy("Allow", serveRegion="us-east-1"),
        policy("Deny"),
        FunctionInvokeError("UnauthorizedError", "Unauthorized"),
        FunctionInvokeError("KeyStoreError", "the table"),
        {"no": "policy"},
        policy("Allow", resource="arn:aws:execute-api:us-west-2:*:api/v1/*"),
        policy("Allow", resource="arn:aws:execute-api:us-west-2:*:api/v1/GET/*"),
    ]

    def invoke(_: dict[str, Any]) -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    gate = AuthorizerGate(RequestAuthorizer("b", "F", ("method.request.header.Authorization",), 0), invoke)
    allowed = gate.decide(event({"authorization": "Bearer x"}))  # header names are matched in any case
    assert (allowed.status, dict(allowed.context), allowed.principal) == (
        200,
        {"serveRegion": "us-east-1"},
        "k1",
    )
    statuses = [gate.decide(event({"Authorization": "Bearer x"})).status for _ in range(6)]
    assert statuses == [403, 401, 500, 500, 200, 403]  # a wildcard resource holds; another method does not
    assert gate.last_error == "KeyStoreError: the table"


def test_a_missing_identity_source_is_401_without_a_call_and_a_ttl_caches_by_identity() -> None:
    calls: list[str] = []

    def invoke(made: dict[str, Any]) -> Any:
        calls.append(made["headers"]["Authorization"])
        return policy("Allow", resource="arn:aws:execute-api:us-west-2:*:api/v1/POST/*")

    clock = Clock()
    gate = AuthorizerGate(
        RequestAuthorizer("b", "F", ("method.request.header.Authorization",), 60), invoke, clock
    )
    assert gate.decide(event({})).status == 401 and gate.decide(event({"Authorization": ""})).status == 401
    assert calls == []
    assert gate.decide(event({"Authorization": "Bearer a"})).status == 200
    assert (
        gate.decide(event({"Authorization": "Bearer a"}, "/inference/other")).status == 200
    )  # cached policy
    assert gate.decide(event({"Authorization": "Bearer b"})).status == 200
    clock.now = 61
    assert gate.decide(event({"Authorization": "Bearer a"})).status == 200
    assert calls == ["Bearer a", "Bearer b", "Bearer a"]
