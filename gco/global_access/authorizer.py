"""The global front door's authorizer: an API Gateway REQUEST authorizer event -> Allow, Deny or 401.

Each Region's global REST API (`stacks/constructs/global_front_door.py`) runs it on every request
(result TTL 0: nothing is cached, so a revoked key is refused on its next request). `decide` is the
pure mapping; `handle` reads the two records through the `Tables` port and builds the policy:

1. `Authorization: Bearer gco-<key_id>-<secret>` is parsed (`keys.parse_bearer`); a missing or
   malformed header is 401 (the Lambda fails with the message `Unauthorized`, which API Gateway
   answers as 401: "Output from an API Gateway Lambda authorizer", API Gateway Developer Guide,
   https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-lambda-authorizer-output.html);
2. the endpoint is the first segment of the path under `/inference/`;
3. the key's record (this Region's replica of the keys table) is checked (`keys.verify`): unknown,
   wrong or revoked is 401, a key not scoped to the endpoint is 403 (Deny);
4. the endpoint's record (this Region's replica of the endpoint table) decides who serves
   (`routing.choose_regions`): here first when it can, else the next in the deployment's order. A
   request already forwarded once (`X-Gco-Hop: 1`) is only ever served here, so no request moves
   twice; nobody able to serve (a resident endpoint whose Regions all fail included) is 403 (Deny),
   never another Region.

Allow carries `context.serveRegion` (the integration sends it to the proxy as `X-Gco-Serve-Region`)
and `context.keyId` (for the access log; never the key). Nothing here logs or returns the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from gco.endpoints.serving import ServingRecord
from gco.front_door import HOP_HEADER, HOP_VALUE
from gco.global_access.errors import BearerFormatError, UnauthorizedError
from gco.global_access.keys import ApiKey, parse_bearer, verify
from gco.global_access.routing import choose_regions, unavailable_message

AUTHORIZATION_HEADER = "Authorization"
# The authorizer's context keys (`$context.authorizer.<key>` in the integration's request parameters).
SERVE_REGION_CONTEXT = "serveRegion"
KEY_ID_CONTEXT = "keyId"
REASON_CONTEXT = "reason"
INFERENCE_PREFIX = "/inference/"
# The function's environment (set by the stack): the tables, and the deployment's Regions nearest-first.
REGION_ORDER_ENV = "GCO_REGION_ORDER"
STALE_AFTER_ENV = "GCO_STALE_AFTER_S"
# The log message of a decision that could not be made (a table unreadable): the stack counts these
# lines with a metric filter and alarms on them. The function's Errors metric alone cannot say it: a
# 401 is a function error too (module docstring, step 1), and callers with bad keys must not page
# anyone.
FAILURE_MESSAGE = "authorizer could not decide"
FAILURE_METRIC = "AuthorizerFailures"
# The log message of every decision made, with its effect in the field `EFFECT_FIELD`: the stack
# counts the 401s among them (`REFUSAL_METRIC`) and takes them out of the function's Errors, so that
# what remains are the errors no line of this code explains (an import error, a timeout, memory
# exhausted; `stacks/constructs/authorizer_alarms.py`).
DECISION_MESSAGE = "authorizer decision"
EFFECT_FIELD = "effect"
REFUSAL_METRIC = "AuthorizerRefusals"
METRICS_NAMESPACE = "gco/global"

Effect = Literal["Allow", "Deny", "Unauthorized"]
REFUSED: Effect = "Unauthorized"  # the effect answered by failing (401), counted as a function error


class Tables(Protocol):
    """The two reads of one decision, each from this Region's replica (`DynamoTables`)."""

    def api_key(self, key_id: str) -> ApiKey | None:
        """The key's stored record, or None when no key has this id."""
        ...

    def endpoint(self, name: str) -> ServingRecord | None:
        """The endpoint's record's serving fields, or None when there is no such endpoint."""
        ...


@dataclass(frozen=True)
class Settings:
    """What the stack tells one Region's authorizer.

    Attributes:
        region: this Region (where the request arrived).
        order: every Region of the deployment, nearest-first (`global_address.region_order`).
        stale_after_s: the oldest Region status that still counts (`math.inf`: no bound; see
            `gco.global_access.routing`).
    """

    region: str
    order: tuple[str, ...]
    stale_after_s: float = math.inf

    @classmethod
    def from_env(cls, env: Mapping[str, str], region: str) -> Settings:
        """Read from the function's environment (`REGION_ORDER_ENV`, `STALE_AFTER_ENV`)."""
        order = tuple(item for item in env.get(REGION_ORDER_ENV, "").split(",") if item)
        stale = env.get(STALE_AFTER_ENV)
        return cls(region=region, order=order, stale_after_s=float(stale) if stale else math.inf)


@dataclass(frozen=True)
class Decision:
    """What to answer: Allow with the serving Region, Deny (403) or Unauthorized (401), and why."""

    effect: Effect
    reason: str = ""
    serve_region: str | None = None
    key_id: str | None = None


def header(headers: Mapping[str, str] | None, name: str) -> str | None:
    """A request header by name, whatever its case (HTTP header names are case-insensitive)."""
    wanted = name.lower()
    for key, value in (headers or {}).items():
        if key.lower() == wanted:
            return value
    return None


def endpoint_of(path: str) -> str | None:
    """The endpoint a path names: `/inference/<name>/...` -> `<name>` (None for any other path)."""
    if not path.startswith(INFERENCE_PREFIX):
        return None
    name = path[len(INFERENCE_PREFIX) :].split("/", 1)[0]
    return name or None


def decide(event: Mapping[str, Any], tables: Tables, settings: Settings, now: datetime) -> Decision:
    """The decision for one REQUEST authorizer event (module docstring); reads the two records.

    Parameters:
        event: API Gateway's REQUEST authorizer input (`headers`, `path`, `methodArn`).
        tables: this Region's replicas of the keys and endpoint tables.
        settings: this Region and the deployment's order.
        now: the decision's time (a key's check and the status bound).

    Returns:
        Allow naming the serving Region, Deny (403) or Unauthorized (401), each with its reason.

    Raises:
        KeyStoreError: the keys table could not be read, or holds a malformed key record.
        StoreUnavailableError: the endpoint table could not be read.
        MalformedRecordError: the endpoint's stored record does not parse.
        (Each makes the function fail: API Gateway answers 500, and the errors alarm counts it.)
    """
    headers = event.get("headers") or {}
    try:
        key_id, key = parse_bearer(header(headers, AUTHORIZATION_HEADER))
    except BearerFormatError as error:
        return Decision("Unauthorized", str(error))
    name = endpoint_of(str(event.get("path") or ""))
    if name is None:
        return Decision("Deny", "not an endpoint's path (/inference/<name>/...)", key_id=key_id)
    verdict = verify(key, tables.api_key(key_id), name, now)
    if not verdict.allowed:
        return Decision("Unauthorized" if verdict.status == 401 else "Deny", verdict.reason, key_id=key_id)
    record = tables.endpoint(name)
    if record is None:
        return Decision("Deny", f"no endpoint {name!r}", key_id=key_id)
    regions = choose_regions(record, settings.region, settings.order, now, settings.stale_after_s)
    if header(headers, HOP_HEADER) == HOP_VALUE:
        # Forwarded once already: served here or not at all, never moved again.
        regions = [settings.region] if settings.region in regions else []
    if not regions:
        return Decision("Deny", unavailable_message(record, now, settings.stale_after_s), key_id=key_id)
    return Decision("Allow", serve_region=regions[0], key_id=key_id)


def policy(decision: Decision, method_arn: str) -> dict[str, Any]:
    """The authorizer's answer for Allow or Deny: an IAM policy on this method, and the context.

    Raises:
        ValueError: for an Unauthorized decision, which is answered by failing, not by a policy.
    """
    if decision.effect == "Unauthorized":
        raise ValueError("an Unauthorized decision has no policy: raise UnauthorizedError")
    return _answer(decision, method_arn)


def _answer(decision: Decision, method_arn: str) -> dict[str, Any]:
    """The policy of an Allow or Deny decision (the caller has answered Unauthorized already)."""
    context = {KEY_ID_CONTEXT: decision.key_id or ""}
    if decision.serve_region is not None:
        context[SERVE_REGION_CONTEXT] = decision.serve_region
    if decision.effect == "Deny":
        # Shown to the caller by the API's 403 gateway response, inside a JSON string: no quote or
        # backslash may end it early (the reasons hold names and Regions, never the key).
        context[REASON_CONTEXT] = decision.reason.replace("\\", "/").replace('"', "'")
    return {
        "principalId": decision.key_id or "anonymous",
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {"Action": "execute-api:Invoke", "Effect": decision.effect, "Resource": method_arn}
            ],
        },
        "context": context,
    }


def handle(event: Mapping[str, Any], tables: Tables, settings: Settings, now: datetime) -> dict[str, Any]:
    """The authorizer's whole answer: a policy, or `UnauthorizedError` for 401.

    Raises:
        UnauthorizedError: no valid key (API Gateway answers 401).
        KeyStoreError, StoreUnavailableError, MalformedRecordError: as `decide` (500).
    """
    decision = decide(event, tables, settings, now)
    if decision.effect == "Unauthorized":
        raise UnauthorizedError
    return _answer(decision, str(event.get("methodArn") or ""))
