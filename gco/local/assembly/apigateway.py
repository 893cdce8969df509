"""API Gateway's side of a REQUEST Lambda authorizer, as the template configures it: the local stack's
stand-in for calling the global address's authorizer.

From an `AWS::ApiGateway::Authorizer` of type REQUEST: its function (the one its `AuthorizerUri`
invokes), its identity sources and its result TTL. For each request (API Gateway Developer Guide,
"Use API Gateway Lambda authorizers", "Input to an API Gateway Lambda authorizer" and "Output from an
API Gateway Lambda authorizer"):

- an identity source (`method.request.header.X`, `method.request.querystring.X`) that is missing or
  empty answers 401 without invoking the function ("If a specified identity source is missing, null,
  or empty, API Gateway returns a 401 Unauthorized response without calling the authorizer Lambda
  function");
- the function gets the REQUEST event (`request_event`: `type`, `methodArn`, `resource`, `path`,
  `httpMethod`, `headers` and `multiValueHeaders`, `queryStringParameters`, `pathParameters`,
  `stageVariables`, `requestContext`);
- its answer decides: an error whose message is exactly "Unauthorized" is 401; any other error, or an
  answer with no policy, is 500 (API Gateway's `AuthorizerConfigurationException`); a policy that
  allows `execute-api:Invoke` on the request's method ARN is 200 with its `context`, else 403;
- with a TTL over 0 the answer is cached by the identity sources' values for that many seconds and
  its policy applied to later methods (the injected clock decides).

Not modelled: the authorizer's 10-second limit of API Gateway's own (the function's timeout is), the
`Deny` answer's gateway response templates, the 8 KB policy size limit, and cache eviction by size.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gco.local.assembly.reader import StackArtifact
from gco.local.assembly.resolve import ACCOUNT
from gco.local.errors import AssemblyError, FunctionInvokeError

AUTHORIZER_TYPE = "AWS::ApiGateway::Authorizer"
UNAUTHORIZED = "Unauthorized"  # the one error message API Gateway answers with 401
_HEADER, _QUERY = "method.request.header.", "method.request.querystring."


@dataclass(frozen=True)
class RequestAuthorizer:
    """A REQUEST authorizer of the template: its name, function (logical id), identity sources, TTL."""

    name: str
    function: str
    identity_sources: tuple[str, ...]
    ttl_s: int


@dataclass(frozen=True)
class Verdict:
    """What API Gateway does with the request: its status (200 lets it through), and the context."""

    status: int
    context: Mapping[str, Any] = field(default_factory=dict)
    principal: str | None = None


def _function_in(uri: Any) -> str | None:
    """The function an `AuthorizerUri` invokes: the logical id its `Fn::GetAtt [id, Arn]` names."""
    if isinstance(uri, Mapping):
        if isinstance(uri.get("Fn::GetAtt"), list) and uri["Fn::GetAtt"][1] == "Arn":
            return str(uri["Fn::GetAtt"][0])
        uri = list(uri.values())
    if isinstance(uri, list):
        for item in uri:
            found = _function_in(item)
            if found is not None:
                return found
    return None


def request_authorizers(stack: StackArtifact) -> dict[str, RequestAuthorizer]:
    """The stack's REQUEST authorizers by logical id.

    Raises:
        AssemblyError: an authorizer whose URI names no function of the stack.
    """
    found: dict[str, RequestAuthorizer] = {}
    for logical_id, resource in stack.resources(AUTHORIZER_TYPE).items():
        props = resource.get("Properties", {})
        if props.get("Type") != "REQUEST":
            continue
        function = _function_in(props.get("AuthorizerUri"))
        if function is None:
            raise AssemblyError(f"{stack.name}/{logical_id}: its AuthorizerUri names no function")
        sources = tuple(s.strip() for s in str(props.get("IdentitySource", "")).split(",") if s.strip())
        found[logical_id] = RequestAuthorizer(
            name=str(props.get("Name", logical_id)),
            function=function,
            identity_sources=sources,
            ttl_s=int(props.get("AuthorizerResultTtlInSeconds", 300)),  # API Gateway's default
        )
    return found


def method_arn(region: str, api_id: str, stage: str, method: str, path: str) -> str:
    return f"arn:aws:execute-api:{region}:{ACCOUNT}:{api_id}/{stage}/{method}{path}"


def request_event(
    *, region: str, api_id: str, stage: str, method: str, path: str, headers: Mapping[str, str],
    query: Mapping[str, str] | None = None, resource: str = "/{proxy+}", source_ip: str = "127.0.0.1",
) -> dict[str, Any]:  # fmt: skip
    """The REQUEST authorizer's input for one request, in API Gateway's documented shape."""
    query = dict(query or {})
    return {
        "type": "REQUEST",
        "methodArn": method_arn(region, api_id, stage, method, path),
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": dict(headers),
        "multiValueHeaders": {name: [value] for name, value in headers.items()},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {name: [value] for name, value in query.items()},
        "pathParameters": {"proxy": path.lstrip("/")} if resource.endswith("{proxy+}") else {},
        "stageVariables": {},
        "requestContext": {
            "path": f"/{stage}{path}",
            "accountId": ACCOUNT,
            "resourcePath": resource,
            "stage": stage,
            "requestId": str(uuid.uuid4()),
            "identity": {"sourceIp": source_ip, "userAgent": headers.get("User-Agent", "")},
            "httpMethod": method,
            "apiId": api_id,
        },
    }


class AuthorizerGate:
    """API Gateway calling one REQUEST authorizer (see the module's docstring).

    Parameters:
        invoke: the authorizer function's invocation (`AssetFunction.invoke`).
    """

    def __init__(
        self,
        authorizer: RequestAuthorizer,
        invoke: Callable[[dict[str, Any]], Any],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.authorizer = authorizer
        self.invoke = invoke
        self.clock = clock
        self.invocations = 0
        self.last_error: str | None = None  # the last failed invocation's error (what Lambda would log)
        self._cache: dict[tuple[str, ...], tuple[float, Mapping[str, Any]]] = {}

    def _identity(self, event: Mapping[str, Any]) -> tuple[str, ...] | None:
        headers = {name.lower(): value for name, value in (event.get("headers") or {}).items()}
        query = event.get("queryStringParameters") or {}
        values = []
        for source in self.authorizer.identity_sources:
            if source.startswith(_HEADER):
                value = headers.get(source.removeprefix(_HEADER).lower())
            else:
                value = query.get(source.removeprefix(_QUERY))
            if not value:
                return None
            values.append(str(value))
        return tuple(values)

    def decide(self, event: dict[str, Any]) -> Verdict:
        """The verdict on one request's REQUEST event."""
        identity = self._identity(event)
        if identity is None:
            return Verdict(401)
        cached = self._cache.get(identity)
        if cached is not None and cached[0] > self.clock():
            return _verdict(cached[1], str(event["methodArn"]))
        self.invocations += 1
        try:
            answer = self.invoke(event)
        except FunctionInvokeError as error:
            self.last_error = str(error)
            return Verdict(401 if str(error).split(": ", 1)[-1] == UNAUTHORIZED else 500)
        if not isinstance(answer, Mapping) or "policyDocument" not in answer:
            return Verdict(500)
        if self.authorizer.ttl_s > 0:
            self._cache[identity] = (self.clock() + self.authorizer.ttl_s, answer)
        return _verdict(answer, str(event["methodArn"]))


def _verdict(answer: Mapping[str, Any], arn: str) -> Verdict:
    statements = answer["policyDocument"].get("Statement", [])
    statements = statements if isinstance(statements, list) else [statements]
    allowed = denied = False
    for statement in statements:
        actions = statement.get("Action", [])
        resources = statement.get("Resource", [])
        actions = actions if isinstance(actions, list) else [actions]
        resources = resources if isinstance(resources, list) else [resources]
        if not any(_glob(action, "execute-api:Invoke") for action in actions):
            continue
        if any(_glob(resource, arn) for resource in resources):
            allowed |= statement.get("Effect") == "Allow"
            denied |= statement.get("Effect") == "Deny"
    context = answer.get("context") or {}
    principal = answer.get("principalId")
    return Verdict(
        200 if allowed and not denied else 403, context, None if principal is None else str(principal)
    )


def _glob(pattern: str, value: str) -> bool:
    """IAM's wildcards: `*` any run of characters, `?` one."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in str(pattern))
    return re.fullmatch(regex, value) is not None


RESPONSE_TYPE = "AWS::ApiGateway::GatewayResponse"
JSON_TYPE = "application/json"
# What API Gateway answers for an authorizer's refusal when the API sets no gateway response of the
# type ("Gateway response types", API Gateway Developer Guide: UNAUTHORIZED 401, ACCESS_DENIED 403,
# AUTHORIZER_FAILURE and AUTHORIZER_CONFIGURATION_ERROR 500, each `{"message":$context.error.messageString}`).
DEFAULT_RESPONSES = {
    401: ("UNAUTHORIZED", '{"message":"Unauthorized"}'),
    403: ("ACCESS_DENIED", '{"message":"User is not authorized to access this resource"}'),
    500: ("AUTHORIZER_FAILURE", '{"message":null}'),
}
_CONTEXT_VARIABLE = re.compile(r"\$context\.authorizer\.(\w+)|\$context\.requestId")


@dataclass(frozen=True)
class GatewayAnswer:
    """API Gateway's answer to a refused request: its status and body."""

    status: int
    body: bytes


def gateway_responses(stack: StackArtifact) -> dict[str, tuple[int, str]]:
    """The stack's gateway responses by type: status and JSON template."""
    found = {}
    for resource in stack.resources(RESPONSE_TYPE).values():
        props = resource.get("Properties", {})
        template = props.get("ResponseTemplates", {}).get(JSON_TYPE)
        if isinstance(template, str):
            found[str(props["ResponseType"])] = (int(props.get("StatusCode", 0)), template)
    return found


def render(template: str, context: Mapping[str, Any], request_id: str) -> bytes:
    """A response template with `$context.requestId` and `$context.authorizer.<key>` filled in (an
    absent key is empty, as in API Gateway's mapping templates)."""

    def value(match: re.Match[str]) -> str:
        return request_id if match.group(1) is None else str(context.get(match.group(1), ""))

    return _CONTEXT_VARIABLE.sub(value, template).encode()


class GlobalApiGate:
    """The global API's way in as API Gateway runs it: its REQUEST authorizer decides each request
    (`AuthorizerGate`), a refusal is answered with the API's own gateway response of its type.

    Parameters:
        gate: the authorizer's gate; responses: `gateway_responses` of the API's stack.
        region, api_id, stage: the method ARNs' parts.
    """

    def __init__(
        self,
        gate: AuthorizerGate,
        responses: Mapping[str, tuple[int, str]],
        *,
        region: str,
        api_id: str = "local",
        stage: str = "prod",
    ) -> None:
        self.gate = gate
        self.responses = dict(responses)
        self.region = region
        self.api_id = api_id
        self.stage = stage

    def check(
        self, method: str, path: str, headers: Mapping[str, str], query: Mapping[str, str]
    ) -> GatewayAnswer | None:
        """None when the request may go on; else what API Gateway answers it."""
        event = request_event(
            region=self.region, api_id=self.api_id, stage=self.stage, method=method, path=path,
            headers=headers, query=query,
        )  # fmt: skip
        verdict = self.gate.decide(event)
        if verdict.status == 200:
            return None
        kind, fallback = DEFAULT_RESPONSES.get(verdict.status, DEFAULT_RESPONSES[500])
        status, template = self.responses.get(kind, (verdict.status, fallback))
        request_id = str(event["requestContext"]["requestId"])
        return GatewayAnswer(status or verdict.status, render(template, verdict.context, request_id))
