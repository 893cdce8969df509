"""The global front door's authorizer: event -> 401, Deny (403) or Allow naming the serving Region."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gco.endpoints import parse_spec
from gco.endpoints.record import EndpointRecord
from gco.endpoints.serving import ServingRecord, serving_of
from gco.endpoints.tokens import format_timestamp
from gco.global_access.authorizer import (
    KEY_ID_CONTEXT,
    REASON_CONTEXT,
    REGION_ORDER_ENV,
    SERVE_REGION_CONTEXT,
    STALE_AFTER_ENV,
    Settings,
    decide,
    endpoint_of,
    handle,
    header,
    policy,
)
from gco.global_access.errors import UNAUTHORIZED, UnauthorizedError
from gco.global_access.keys import ApiKey, new_key

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
LIFE = "l" * 64
EAST, WEST, EU = "us-east-1", "us-west-2", "eu-west-1"
ARN = "arn:aws:execute-api:us-east-1:111122223333:abc123/v1/POST/inference/smol/v1/completions"
SETTINGS = Settings(region=EAST, order=(EAST, WEST, EU))


def status(state: str = "running", ready: int = 1) -> dict[str, Any]:
    return {
        "state": state,
        "replicas_ready": ready,
        "replicas_desired": 1,
        "last_sync": format_timestamp(NOW),
        "lifecycle_id": LIFE,
    }


def record(statuses: dict[str, dict[str, Any]], residency: dict[str, Any] | None = None) -> ServingRecord:
    spec: dict[str, Any] = {"image": "vllm/vllm-openai:v0.6.3"}
    if residency is not None:
        spec["residency"] = residency
    return serving_of(
        EndpointRecord(
            endpoint_name="smol",
            lifecycle_id=LIFE,
            desired_state="running",
            target_regions=[EAST, WEST, EU],
            spec=parse_spec(spec),
            region_status=statuses,
        )
    )


@dataclass
class StandInTables:
    """Stands in for the two DynamoDB replicas (`authorizer_tables.DynamoTables`): a dict each; it
    does not model replication lag or read errors. Counts reads, so a test sees what was read."""

    keys: dict[str, ApiKey] = field(default_factory=dict)
    endpoints: dict[str, ServingRecord] = field(default_factory=dict)
    reads: list[str] = field(default_factory=list)

    def api_key(self, key_id: str) -> ApiKey | None:
        self.reads.append(f"key:{key_id}")
        return self.keys.get(key_id)

    def endpoint(self, name: str) -> ServingRecord | None:
        self.reads.append(f"endpoint:{name}")
        return self.endpoints.get(name)


def tables_with(rec: ServingRecord, endpoints: list[str] | None = None) -> tuple[str, StandInTables]:
    plaintext, key = new_key("ci", endpoints or ["*"], now=NOW - timedelta(days=1))
    return plaintext, StandInTables(keys={key.key_id: key}, endpoints={"smol": rec})


def event(key: str | None, path: str = "/inference/smol/v1/completions", **headers: str) -> dict[str, Any]:
    sent = dict(headers)
    if key is not None:
        sent["authorization"] = f"Bearer {key}"
    return {"type": "REQUEST", "methodArn": ARN, "path": path, "headers": sent}


def test_a_valid_key_is_served_here_when_here_runs_it() -> None:
    key, tables = tables_with(record({EAST: status(), WEST: status()}))
    answer = handle(event(key), tables, SETTINGS, NOW)
    assert answer["policyDocument"]["Statement"] == [
        {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": ARN}
    ]
    assert answer["context"][SERVE_REGION_CONTEXT] == EAST
    assert answer["context"][KEY_ID_CONTEXT] == answer["principalId"] == key.split("-")[1]
    assert key not in repr(answer)  # the key never leaves in the answer


def test_a_region_without_a_ready_replica_sends_the_request_to_the_next_in_order() -> None:
    key, tables = tables_with(record({EAST: status(ready=0), WEST: status(state="error"), EU: status()}))
    assert decide(event(key), tables, SETTINGS, NOW).serve_region == EU


def test_a_forwarded_request_is_served_here_or_refused_never_moved_again() -> None:
    key, tables = tables_with(record({EAST: status(ready=0), WEST: status()}))
    assert decide(event(key, **{"X-Gco-Hop": "1"}), tables, SETTINGS, NOW).effect == "Deny"
    here = Settings(region=WEST, order=SETTINGS.order)
    assert decide(event(key, **{"x-gco-hop": "1"}), tables, here, NOW).serve_region == WEST


def test_a_resident_endpoint_is_refused_rather_than_served_elsewhere() -> None:
    resident = record(
        {EAST: status(ready=0), WEST: status(ready=0), EU: status()},
        {"enabled": True, "regions": [EAST, WEST]},
    )
    key, tables = tables_with(resident)
    decision = decide(event(key), tables, SETTINGS, NOW)
    assert decision.effect == "Deny" and "resident" in decision.reason and decision.serve_region is None


@pytest.mark.parametrize(
    ("authorization", "reason"),
    [
        (None, "no Authorization header"),
        ("Basic dXNlcjpwYXNz", "not Bearer"),
        ("Bearer sk-openai-style", "not a gco key"),
    ],
)
def test_no_gco_bearer_key_is_401_without_a_table_read(authorization: str | None, reason: str) -> None:
    _, tables = tables_with(record({EAST: status()}))
    headers = {} if authorization is None else {"Authorization": authorization}
    decision = decide({"path": "/inference/smol/x", "headers": headers}, tables, SETTINGS, NOW)
    assert (decision.effect, tables.reads) == ("Unauthorized", [])
    assert reason in decision.reason
    with pytest.raises(UnauthorizedError) as raised:
        handle({"path": "/inference/smol/x", "headers": headers}, tables, SETTINGS, NOW)
    assert str(raised.value) == UNAUTHORIZED  # the exact message API Gateway turns into 401


def test_unknown_wrong_and_revoked_keys_are_401_and_out_of_scope_is_403() -> None:
    key, tables = tables_with(record({EAST: status()}), endpoints=["other"])
    key_id = key.split("-")[1]
    assert decide(event(key), tables, SETTINGS, NOW).effect == "Deny"  # scoped to another endpoint
    forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    assert decide(event(forged), tables, SETTINGS, NOW).effect == "Unauthorized"
    tables.keys[key_id] = dataclasses.replace(
        tables.keys[key_id], endpoints=["*"], revoked_at=format_timestamp(NOW)
    )
    assert decide(event(key), tables, SETTINGS, NOW).effect == "Unauthorized"  # revoked: at once
    tables.keys.clear()
    assert decide(event(key), tables, SETTINGS, NOW).effect == "Unauthorized"


def test_no_endpoint_or_another_path_is_denied() -> None:
    key, tables = tables_with(record({EAST: status()}))
    assert (
        decide(event(key, path="/inference/absent/v1"), tables, SETTINGS, NOW).reason
        == "no endpoint 'absent'"
    )
    assert decide(event(key, path="/healthz"), tables, SETTINGS, NOW).effect == "Deny"
    deny = policy(decide(event(key, path="/other"), tables, SETTINGS, NOW), ARN)
    assert (
        deny["policyDocument"]["Statement"][0]["Effect"] == "Deny"
        and SERVE_REGION_CONTEXT not in deny["context"]
    )
    assert deny["context"][REASON_CONTEXT] == "not an endpoint's path (/inference/<name>/...)"


def test_paths_headers_and_settings() -> None:
    assert endpoint_of("/inference/smol/v1/chat/completions") == "smol"
    assert endpoint_of("/inference/smol") == "smol"
    assert endpoint_of("/inference/") is None and endpoint_of("/v1/completions") is None
    assert header({"AUTHORIZATION": "x"}, "Authorization") == "x" and header(None, "a") is None
    env = {REGION_ORDER_ENV: "us-west-2,us-east-1", STALE_AFTER_ENV: "120"}
    assert Settings.from_env(env, EAST) == Settings(region=EAST, order=(WEST, EAST), stale_after_s=120.0)
    assert Settings.from_env({}, EAST).stale_after_s == math.inf
    with pytest.raises(ValueError, match="no policy"):
        policy(decide({"headers": {}}, StandInTables(), SETTINGS, NOW), ARN)
