"""States that mean what runs, over the local stack: `deploy --wait` then `list --state running`
finds the endpoint; a Region in error is listed as error with its reason; the canary (image,
weight, replicas, ready) is in the tables; `invoke` says which version answered; `deploy --wait`
names a Region no stack serves, and one whose reconciler is not live (its heartbeat)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from gco import aws
from gco.endpoints import EndpointStore
from gco.inference.invoke import INVOKE_CA_BUNDLE_ENV, INVOKE_URLS_ENV
from gco.local.moto.motoserver import MotoServer
from gco.local.region.cluster import LocalClusters
from gco.reconcile.heartbeat import HeartbeatWriter, SsmParameters, liveness, read_heartbeat
from tests.functional.cli.test_inference_cli import Cli
from tests.functional.local.conftest import eventually
from tests.functional.local.test_canary import CANARY_IMAGE
from tests.functional.local.test_engines import MODEL, REVISION, running
from tests.unit.reconcile.records import EAST, IMAGE, WEST

DEPLOY = ("--image", IMAGE, "--model-id", MODEL, "--model-revision", REVISION)


@pytest.fixture
def cli(
    store: EndpointStore,
    moto: MotoServer,
    clusters: LocalClusters,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Cli:
    monkeypatch.setenv(INVOKE_URLS_ENV, json.dumps(clusters.invoke_urls()))
    if clusters.ca_bundle is not None:
        monkeypatch.setenv(INVOKE_CA_BUNDLE_ENV, str(clusters.ca_bundle))
    return Cli(moto, capsys, store.table_name)


def test_running_after_deploy_wait_and_the_canary_in_every_table(store: EndpointStore, cli: Cli) -> None:
    deployed = cli.json(
        "inference",
        "deploy",
        "smol",
        "--region",
        EAST,
        "--region",
        WEST,
        "--wait",
        "--timeout",
        "60",
        *DEPLOY,
    )
    assert deployed["desired_state"] == "deploying" and deployed["observed"]["state"] == "running"
    assert [r["endpoint_name"] for r in cli.json("inference", "list", "--state", "running")] == ["smol"]
    out, _ = cli("inference", "list", "--state", "running")
    # the stored `deploying` reads as what it is once every Region runs it
    assert out.splitlines()[1].split()[:5] == ["smol", "running", "running", EAST, "running,"]

    cli("inference", "canary", "smol", "--image", CANARY_IMAGE, "--weight", "30")
    eventually(
        lambda: running(store, "smol", EAST, 2) and running(store, "smol", WEST, 2), "the canary ready"
    )
    out, _ = cli("inference", "list")
    assert f"{CANARY_IMAGE} 30% x1" in out
    out, _ = cli("inference", "status", "smol")
    assert f"canary:        {CANARY_IMAGE} 30% x1 (ready: {EAST} 1/1, {WEST} 1/1)" in out
    assert "(no Regional stack output found)" not in out and f"invoke {EAST}: http" in out
    versions = set()
    for _ in range(30):
        answer = cli.json("inference", "invoke", "smol", "--region", EAST, "--prompt", "hi")
        versions.add(answer["version"])
    assert versions == {"primary", "canary"}
    out, _ = cli("inference", "invoke", "smol", "--region", EAST, "--prompt", "hi")
    assert (
        ", answered by primary (" in out.splitlines()[0] or f"canary ({CANARY_IMAGE})" in out.splitlines()[0]
    )


def test_a_region_in_error_is_listed_as_error_with_its_reason(store: EndpointStore, cli: Cli) -> None:
    # The CLI refuses an ungranted namespace up front; a record written by other code still reaches
    # the reconciler, which refuses it with a terminal status.
    store.create("lost", {"image": IMAGE, "model_id": MODEL, "model_revision": REVISION}, [EAST],
                 namespace="not-granted")  # fmt: skip
    eventually(lambda: cli.json("inference", "list", "--state", "error"), "the namespace refusal reported")
    (listed,) = cli.json("inference", "list", "--state", "error")
    assert listed["desired_state"] == "deploying"
    assert listed["observed"]["reason"].startswith(f"{EAST}: namespace not-granted is not granted")
    out, _ = cli("inference", "list")
    assert out.splitlines()[1].split()[:5] == ["lost", "rolling", "out", "error", EAST]


def test_deploy_wait_names_a_region_no_reconciler_serves(
    store: EndpointStore, cli: Cli, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The local clusters serve us-east-1 and eu-west-1 only: us-west-2 has no reconciler."""
    monkeypatch.setattr("gco.cli.progress.SILENT_REGION_S", 0.0)  # the wait's patience, not the test's
    args = (
        "inference",
        "deploy",
        "far",
        "--region",
        EAST,
        "--region",
        "us-west-2",
        "--wait",
        "--timeout",
        "3",
    )
    _, err = cli(*args, *DEPLOY, code=1)
    assert "us-west-2 pending (no stack serves us-west-2, so no reconciler will: " in err
    assert "gco inference regions far --remove us-west-2)" in err
    assert err.splitlines()[-1].startswith("error: timed out after 3 s waiting for far ready: ")


def test_deploy_wait_names_a_region_whose_reconciler_never_beat_or_stopped(
    store: EndpointStore, cli: Cli, clusters: LocalClusters, moto: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """us-east-1's reconciler runs (its sweep writes a heartbeat); us-west-2 is named as served (a
    stack whose reconciler never ran), then given a heartbeat 14 minutes old (one that stopped)."""
    far = "us-west-2"
    monkeypatch.setenv(INVOKE_URLS_ENV, json.dumps({**clusters.invoke_urls(), far: "http://127.0.0.1:9/"}))

    def parameters(region: str) -> SsmParameters:
        return SsmParameters(aws.client("ssm", region=region, endpoint_url=moto.url))

    beat = eventually(
        lambda: read_heartbeat(parameters(EAST), store.table_name, EAST), "us-east-1's heartbeat"
    )
    assert liveness(beat, datetime.now(UTC)).live
    args = ("inference", "deploy", "far", "--region", EAST, "--region", far, "--wait", "--timeout", "3")
    _, err = cli(*args, *DEPLOY, code=1)
    last = err.splitlines()[-1]
    assert last.startswith("error: timed out after 3 s waiting for far ready: ")
    assert f"{far} pending (no live reconciler: no heartbeat was ever written)" in last
    assert "us-east-1 pending (no live reconciler" not in err

    stopped = datetime.now(UTC) - timedelta(minutes=14)
    HeartbeatWriter(parameters(far), store.table_name, 5.0, clock=lambda: stopped).beat(far)
    _, err = cli("inference", "deploy", "far2", "--region", far, "--wait", "--timeout", "2", *DEPLOY, code=1)
    said = f"{far} pending (no live reconciler: last heartbeat {stopped:%Y-%m-%dT%H:%M:%S}Z, 14 min ago)"
    assert said in err.splitlines()[-1]
