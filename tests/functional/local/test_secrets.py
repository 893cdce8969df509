"""An endpoint's `secret_env` over the local stack and the moto server's Secrets Manager: the engine
process gets the value, which is then searched for, and not found, in the table's item, every object
of the stand-in API server (annotations included) but the Secret's own `data`, the reconciler's log
and every engine log file; deleting the endpoint deletes its Secret.

The first two run the source tree's reconciler in this process: the synthesized app is the default
configuration's, whose `cdk.json` names no endpoint secrets, so its functions refuse every `secret_env`
before reading it (the last test shows that refusal through the deployed functions)."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gco import aws
from gco.bench.fake_engine.wire import ENV_DIGEST_PATH
from gco.endpoints import EndpointStore
from gco.local.moto.motoserver import MotoServer
from gco.local.region.cluster import LocalClusters
from gco.reconcile.objects import SECRET
from gco.secrets.endpoint_secrets import secret_name
from tests.conftest import TABLE
from tests.functional.conftest import Deployed
from tests.functional.local.conftest import FAST_RESTART, eventually
from tests.unit.reconcile.records import EAST, IMAGE

VALUE = "hf_local-secret-value-7f3a9c"
NAMESPACE = "gco-inference"
SPEC: dict[str, Any] = {
    "image": IMAGE,
    "model_id": "HuggingFaceTB/SmolLM2-135M",
    "secret_env": {"HF_TOKEN": {"secret_id": "team/hf", "json_key": "token"}},
}


@pytest.fixture
def stack(store: EndpointStore, moto: MotoServer, tmp_path: Path) -> Iterator[LocalClusters]:
    secrets = aws.client("secretsmanager", region=EAST, endpoint_url=moto.url)
    secrets.create_secret(Name="team/hf", SecretString=json.dumps({"token": VALUE, "other": "x"}))
    with LocalClusters(
        store,
        [EAST],
        endpoint_url=moto.url,
        log_dir=tmp_path / "engines",
        wait=0.2,
        poll=0.02,
        proxy="python",
        restart=FAST_RESTART,
    ) as clusters:
        clusters.start(sync_interval=0.05, poll_interval=0.05, sweep_interval=0.3)
        yield clusters


def forms(value: str) -> list[str]:
    """The value as it could be written: plain, JSON-escaped and base64."""
    return [value, json.dumps(value)[1:-1], base64.b64encode(value.encode()).decode()]


def found_in(text: str) -> list[str]:
    return [form for form in forms(VALUE) if form in text]


def test_a_secret_reaches_the_engine_and_nothing_else(
    stack: LocalClusters, store: EndpointStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, botocore's response bodies included
    store.create("smol", SPEC, [EAST])
    kubelet = stack.kubelets[EAST]
    urls = eventually(lambda: kubelet.ready_urls(NAMESPACE, "smol"), "a ready engine")
    answer = httpx.get(urls[0] + ENV_DIGEST_PATH + "HF_TOKEN", timeout=5).json()
    assert answer["sha256"] == hashlib.sha256(VALUE.encode()).hexdigest()

    api = stack.reconcilers.regions[EAST].api
    secret = api.get(SECRET, NAMESPACE, secret_name("smol"))
    assert secret is not None and base64.b64decode(secret["data"]["HF_TOKEN"]).decode() == VALUE
    assert secret["metadata"]["labels"]["gco.dev/endpoint"] == "smol"

    item = aws.client("dynamodb", region=EAST).scan(TableName=TABLE)["Items"]
    assert found_in(json.dumps(item)) == []
    for obj in api.objects():
        shown = {k: v for k, v in obj.items() if not (obj.get("kind") == "Secret" and k == "data")}
        assert found_in(json.dumps(shown)) == [], obj["metadata"]["name"]
    leaked = {r.name for r in caplog.records if found_in(r.getMessage())}
    assert found_in(caplog.text) == [], leaked
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert any(path.suffix == ".log" for path in files)
    for path in files:
        assert found_in(path.read_text(errors="replace")) == [], path

    record = store.get("smol", consistent_read=True)
    assert record is not None
    store.update_desired_state("smol", "deleted", expected_lifecycle_id=record.lifecycle_id)
    eventually(lambda: api.get(SECRET, NAMESPACE, secret_name("smol")) is None, "the Secret deleted")
    eventually(lambda: not kubelet.ready_urls(NAMESPACE, "smol"), "the engine stopped")


def test_a_secret_that_cannot_be_read_is_the_regions_error_naming_the_variable(
    stack: LocalClusters, store: EndpointStore
) -> None:
    store.create("smol", {**SPEC, "secret_env": {"HF_TOKEN": {"secret_id": "team/missing"}}}, [EAST])

    def error() -> str | None:
        record = store.get("smol", consistent_read=True)
        status = record.region_status.get(EAST) if record else None
        return status.error if status is not None and status.state == "error" else None

    message = eventually(error, "the Region's error")
    assert message.startswith("secret_env.HF_TOKEN: secret team/missing: ResourceNotFoundException")
    api = stack.reconcilers.regions[EAST].api
    assert api.get(SECRET, NAMESPACE, secret_name("smol")) is None


@pytest.mark.slow
def test_the_deployed_reconciler_may_read_only_the_secrets_the_deployment_names(
    deployed: Deployed, tmp_path: Path
) -> None:
    """Through the synthesized app: its reconciler's role may read exactly the secrets `cdk.json`'s
    `endpoint_secrets` names (stacks/constructs/reconciler.py), none in the default config. An endpoint
    naming another secret is refused its read (Secrets Manager's 403, moto's IAM enforcing the role's
    policy), as in AWS: the function logs it, the endpoint never runs, and nothing of the secret
    reaches the cluster."""
    secrets = aws.client("secretsmanager", region=EAST, endpoint_url=deployed.server.url)
    secrets.create_secret(Name="team/hf", SecretString=json.dumps({"token": VALUE, "other": "x"}))
    with LocalClusters(
        deployed.store,
        [EAST],
        endpoint_url=deployed.server.url,
        log_dir=tmp_path / "engines",
        proxy="python",
        restart=FAST_RESTART,
        app=deployed.app,
    ) as clusters:
        clusters.start(sync_interval=0.05, poll_interval=0.05, sweep_interval=0.3)
        deployed.store.create("smol", SPEC, [EAST])
        local = clusters.reconcilers.regions[EAST]
        assert local.functions is not None
        log = local.functions.stream.log_path
        eventually(lambda: "secret_env.HF_TOKEN: secret team/hf: 403" in log.read_text(), "the refused read")
        record = deployed.store.get("smol", consistent_read=True)
        assert record is not None
        status = record.region_status.get(EAST)
        assert status is None or status.state != "running"
        assert local.api.get(SECRET, NAMESPACE, secret_name("smol")) is None
        assert all(VALUE not in path.read_text(errors="replace") for path in tmp_path.rglob("*.log"))
