"""The local clusters run the synthesized app's Regional functions, not the source tree's reconciler.

`LocalClusters(app=...)` with the app as `gco local up` synthesizes it (every bundle with its lock's
wheels, for the runtime's Python or, where this machine lacks it, for this one): per Region the stream
function and the sweep from their assets, under their roles (made in the moto server from the
template, IAM enforcement on), fed by the stack's own stream mapping and schedule, authenticated to the
stand-in API server with EKS tokens through the stack's access entries; the home Region's rollout wing
beside them. An endpoint written to the table runs (an engine answers through the Region's proxy, and
through the global address with a key the deployed authorizer lets through), a
rollout request written to its record passes the starter's filter and the rollout state machine
promotes the canary through the rollout functions, and its delete ends with the record purged; with
one action taken out of the stream function's synthesized policy the same write is refused,
AccessDenied naming the action in the function's log, and nothing is reconciled.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from gco.endpoints import EndpointRecord, EndpointStore, operations
from gco.endpoints.codec import to_attribute
from gco.env import DEFAULT_TABLE
from gco.global_access.key_store import DynamoKeyStore
from gco.global_access.keys import ALL_ENDPOINTS
from gco.global_access.routing import REGION_HEADER
from gco.local.assembly.deployed import (
    DeployedApp,
)
from gco.local.assembly.global_api import global_api, keys_table
from gco.local.assembly.iam import role_id, role_name
from gco.local.front.front import GlobalFront
from gco.local.region.cluster import LocalClusters
from gco.local.region.engines import EngineTable
from gco.reconcile.objects import DEPLOYMENT
from gco.rollout.service import REQUEST_ATTRIBUTE
from tests.cdk.synth_cache import HOME
from tests.conftest import SYNTH_GROUP
from tests.functional.conftest import EVIDENCE_BUCKET, Deployed
from tests.functional.local.conftest import FAST_RESTART, eventually
from tests.unit.reconcile.records import IMAGE

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(SYNTH_GROUP)]
NAMESPACE = "gco-inference"
CANARY = "vllm/vllm-openai:v0.6.4"
# Both builds as fast, slow enough for the loopback's noise to stay small beside them (the
# walk-through's rollouts: gco/local/demo/demo_rollout.py), judged with its tolerance.
SPEED = ("--ttft-ms", "100", "--itl-ms", "3")
REQUEST = {"image": CANARY, "block_requests": 4, "rule": {"tolerance": 0.3}}


def without_action(iam: Any, role: str, action: str) -> None:
    """Take `action` out of every inline policy of `role` (as an operator editing the deployed role)."""
    for name in iam.list_role_policies(RoleName=role)["PolicyNames"]:
        document = iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
        kept = []
        for statement in document["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if [a for a in actions if a != action]:
                kept.append({**statement, "Action": [a for a in actions if a != action]})
        iam.put_role_policy(
            RoleName=role, PolicyName=name, PolicyDocument=json.dumps({**document, "Statement": kept})
        )


def through_the_global_address(app: DeployedApp, clusters: LocalClusters, store: EndpointStore) -> None:
    """A request with a key through the global address, decided by the deployed authorizer (the keys
    table its environment names); without the key, the global API's own 401."""
    gate, authorizer = global_api(app, HOME)
    keys = DynamoKeyStore(store.client, keys_table(authorizer))
    key = keys.create("test", [ALL_ENDPOINTS], now=datetime.now(UTC))[0]
    proxies = {region: proxy.url for region, proxy in clusters.proxies.items()}
    front = GlobalFront(store, keys, proxies, gate=gate)
    try:
        url = f"{front.url}/inference/llama/v1/completions"
        answer = httpx.post(
            url, json={"prompt": "hi"}, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
        assert answer.status_code == 200 and answer.headers[REGION_HEADER] == HOME, answer.text
        refused = httpx.post(url, json={"prompt": "hi"}, timeout=30)
        assert refused.status_code == 401 and "a valid gco key is required" in refused.text
        assert authorizer.running.started == 1  # one environment, warm for the second request
    finally:
        front.stop()
        authorizer.close()


@pytest.mark.parametrize("removed", [None, "dynamodb:UpdateItem"])
def test_an_endpoint_runs_and_is_purged_by_the_deployed_functions(
    removed: str | None, deployed: Deployed, tmp_path: Path
) -> None:
    server, app, store = deployed.server, deployed.app, deployed.store
    with LocalClusters(
        store,
        [HOME],
        endpoint_url=server.url,
        log_dir=tmp_path / "engines",
        wait=0.2,
        poll=0.02,
        proxy="python",
        restart=FAST_RESTART,
        app=app,
        evidence_bucket=EVIDENCE_BUCKET,
        table=EngineTable.fake(image_args=dict.fromkeys((IMAGE, CANARY), SPEED)),
    ) as clusters:
        clusters.start(sync_interval=0.05, poll_interval=0.05)
        local = clusters.reconcilers.regions[HOME]
        assert local.functions is not None
        log = local.functions.stream.log_path
        if removed is not None:  # the deployed role changed under the running function
            role = role_name(local.functions.stack.stack, role_id(local.functions.stream.function))
            without_action(app.client("iam", HOME), role, removed)
        store.create("llama", {"image": IMAGE}, [HOME])
        if removed is not None:
            eventually(
                lambda: "AccessDenied" in log.read_text() and removed in log.read_text(), "AccessDenied"
            )
            record = store.get("llama")
            assert record is not None and HOME not in record.region_status
            return
        base = clusters.invoke_urls()[HOME]

        def served() -> bool:
            answer = httpx.post(f"{base}/llama/v1/completions", json={"prompt": "hi"}, timeout=5)
            return answer.status_code == 200

        eventually(served, "an answer through the Region's proxy", deadline_s=60)

        def running() -> EndpointRecord | None:
            found = store.get("llama")
            return found if found is not None and found.region_status[HOME].state == "running" else None

        record = eventually(running, "the Region's status running", deadline_s=60)
        through_the_global_address(app, clusters, store)  # the authorizer serves a running endpoint
        assert local.api.store.get(DEPLOYMENT, NAMESPACE, "llama") is not None
        assert local.functions.stream.running.started >= 1  # it ran in an environment of its asset

        # a rollout asked by a table write: the starter (its filter passes it), the state machine
        wing = clusters.reconcilers.rollouts
        assert wing is not None
        store.client.update_item(
            TableName=DEFAULT_TABLE,
            Key={"endpoint_name": {"S": "llama"}},
            UpdateExpression="SET #r = :r",
            ExpressionAttributeNames={"#r": REQUEST_ATTRIBUTE},
            ExpressionAttributeValues={":r": to_attribute(REQUEST)},
        )
        started = eventually(lambda: wing.states.executions(), "an execution started", deadline_s=60)
        ended = wing.states.wait(started[0], timeout=240)
        assert ended.status == "SUCCEEDED", (ended, (tmp_path / "functions").glob("*"))
        promoted = store.get("llama")
        assert promoted is not None and promoted.spec.image == CANARY
        record = promoted
        operations.delete(store, "llama", expected_lifecycle_id=record.lifecycle_id)
        eventually(lambda: store.get("llama") is None, "the record purged", deadline_s=60)
        assert local.api.store.get(DEPLOYMENT, NAMESPACE, "llama") is None
        assert local.api.forbidden == []
        assert local.functions.stack.tokens.refusals == []
