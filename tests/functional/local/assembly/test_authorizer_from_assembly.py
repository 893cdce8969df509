"""The global address's authorizer run from its synthesized asset, called as API Gateway calls it.

The Regional template's REQUEST authorizer (its identity source, its result TTL, the function its URI
invokes) and the function (its asset, handler, environment, timeout) are read from the assembly; the
function runs in an environment of the runtime's Python with its asset alone on the path
(gco.local.assembly.invoke) and gets API Gateway's documented REQUEST event
(gco.local.assembly.apigateway). A valid key is let through with the serving Region in its context,
an unknown key is 401, a key outside its scope 403, and a request without the identity source is 401
without the function being invoked.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gco import aws
from gco.endpoints import EndpointStore, init_table
from gco.endpoints.codec import to_item
from gco.endpoints.record import RegionStatus
from gco.global_access.key_store import create_keys_table
from gco.global_access.key_store import to_item as key_item
from gco.global_access.keys import new_key
from gco.local.assembly import CloudAssembly, functions
from gco.local.assembly.apigateway import AuthorizerGate, request_authorizers, request_event
from gco.local.assembly.invoke import AssetFunction, FunctionRuntime, credentials_environment
from gco.local.assembly.resolve import Resolver
from gco.local.moto.motoserver import MotoServer
from gco.processes.cpython import find_cpython
from tests.cdk.synth_cache import HOME, OTHER, synthesize_deployed
from tests.conftest import SYNTH_GROUP
from tests.tools.lambda_runtime import runtime_sdk
from tests.unit.reconcile.records import IMAGE

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group(SYNTH_GROUP),
    pytest.mark.skipif(
        find_cpython("3.13") is None, reason="the functions' Python 3.13 is not on this machine"
    ),
]
STACK = f"gco-regional-{OTHER}"


@pytest.fixture(scope="module")
def assembly() -> CloudAssembly:
    return CloudAssembly.open(synthesize_deployed())


@pytest.fixture
def gate(assembly: CloudAssembly, moto: MotoServer, tmp_path: Path) -> Iterator[tuple[AuthorizerGate, str]]:
    stack = assembly.stack(STACK)
    (authorizer,) = request_authorizers(stack).values()
    function = functions(stack)[authorizer.function]
    environment = Resolver(region=OTHER, stack=STACK).resolve(function.environment, "Environment")
    # Both tables are global tables with a replica in every Region: the authorizer reads its own
    # Region's (moto has no global tables, so the replica is made in that Region).
    dynamodb = aws.client("dynamodb", endpoint_url=moto.url, region=OTHER)
    init_table(dynamodb, environment["INFERENCE_ENDPOINTS_TABLE_NAME"])
    create_keys_table(dynamodb, environment["GCO_KEYS_TABLE_NAME"])
    runtime = FunctionRuntime.for_runtime(function.runtime, runtime_sdk(tmp_path / "sdk"))
    variables = {
        **{k: str(v) for k, v in environment.items()},
        **credentials_environment("testing", "testing", None),
        "AWS_ENDPOINT_URL": moto.url,
    }
    with AssetFunction(function, runtime, environment=variables, region=OTHER) as running:
        yield AuthorizerGate(authorizer, running.invoke), environment["GCO_KEYS_TABLE_NAME"]


def running_endpoint(store: EndpointStore, dynamodb: Any, name: str) -> None:
    store.create(name, {"image": IMAGE}, [HOME])
    record = store.get(name)
    assert record is not None
    status = {
        "state": "running",
        "replicas_ready": 1,
        "replicas_desired": 1,
        "lifecycle_id": record.lifecycle_id,
    }
    item = record.model_copy(update={"region_status": {HOME: RegionStatus.model_validate(status)}}).to_json()
    dynamodb.put_item(TableName=store.table_name, Item=to_item(item))


def test_the_synthesized_authorizer_decides_each_request_as_api_gateway_calls_it(
    gate: tuple[AuthorizerGate, str], moto: MotoServer
) -> None:
    authorizer, keys_table = gate
    assert authorizer.authorizer.identity_sources == ("method.request.header.Authorization",)
    assert authorizer.authorizer.ttl_s == 0  # every request decided afresh: a revoked key is refused at once
    dynamodb = aws.client("dynamodb", endpoint_url=moto.url, region=OTHER)
    store = EndpointStore(dynamodb, "gco-inference-endpoints")
    running_endpoint(store, dynamodb, "llama")
    plaintext, key = new_key("team", ["llama"], now=datetime.now(UTC))
    dynamodb.put_item(TableName=keys_table, Item=key_item(key))

    def event(path: str, headers: dict[str, str]) -> dict[str, Any]:
        return request_event(
            region=OTHER, api_id="global", stage="v1", method="POST", path=path, headers=headers
        )

    allowed = authorizer.decide(
        event("/inference/llama/v1/completions", {"Authorization": f"Bearer {plaintext}"})
    )
    assert allowed.status == 200, authorizer.last_error
    assert allowed.principal == key.key_id
    assert allowed.context["serveRegion"] == HOME
    unknown = authorizer.decide(
        event("/inference/llama/v1/completions", {"Authorization": "Bearer gco-nonsense"})
    )
    assert unknown.status == 401
    scoped = authorizer.decide(
        event("/inference/other/v1/completions", {"Authorization": f"Bearer {plaintext}"})
    )
    assert scoped.status == 403
    # A resident endpoint whose one Region does not serve it: denied (403) with the reason, never
    # sent elsewhere (docs/global.md: an authorizer can only allow or deny).
    store.create("resident", {"image": IMAGE, "residency": {"enabled": True}}, [HOME])
    everywhere, every_key = new_key("ops", ["*"], now=datetime.now(UTC))
    dynamodb.put_item(TableName=keys_table, Item=key_item(every_key))
    denied = authorizer.decide(
        event("/inference/resident/v1/completions", {"Authorization": f"Bearer {everywhere}"})
    )
    assert denied.status == 403 and HOME in denied.context.get("reason", ""), denied
    invoked = authorizer.invocations
    assert authorizer.decide(event("/inference/llama/v1/completions", {})).status == 401
    assert authorizer.decide(event("/inference/llama/v1/completions", {"Authorization": ""})).status == 401
    assert authorizer.invocations == invoked  # no identity source: the function is never called
