"""The Lambda entry points (stream and sweep) and the environment they are built from.

It runs the reconciler library in this process (`local`): it calls the handlers with each Region's
in-process reconciler and injects faults into it."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest.mock import Mock

import pytest

from gco import aws
from gco.endpoints import EndpointStore, InvalidSpecError
from gco.local.moto.motoserver import MotoServer
from gco.local.region.reconcilers import LocalReconcilers
from gco.reconcile.errors import ClusterConfigError
from gco.reconcile.expiry import DEADLINE_LABEL, OWNER_LABEL
from gco.reconcile.heartbeat import HeartbeatWriter, SsmParameters, read_heartbeat
from gco.reconcile.reconciler import Reconciler
from gco.reconcile.runtime import LazyReconciler, reconciler_from_env
from tests.unit.reconcile.records import EAST, IMAGE

EVENTS = Path(__file__).parents[2] / "events"


@dataclass
class Context:
    function_name: str = "gco-reconciler"
    function_version: str = "$LATEST"
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:gco-reconciler"
    memory_limit_in_mb: int = 512
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    log_group_name: str = "/aws/lambda/gco-reconciler"
    log_stream_name: str = "stream"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@pytest.fixture(autouse=True)
def powertools_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "gco-test")


def test_stream_lambda_reports_partial_batch_failures(
    store: EndpointStore, local: LocalReconcilers, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lambdas import reconciler as entry

    monkeypatch.setattr(entry, "reconciler", LazyReconciler(lambda: local.regions[EAST].reconciler))
    store.create("llama", {"image": IMAGE}, [EAST])
    event = json.loads((EVENTS / "dynamodb_stream_batch.json").read_text())
    response = entry.handler(event, Context())
    assert response == {"batchItemFailures": [{"itemIdentifier": "222"}]}
    record = store.get("llama")
    assert record is not None
    assert record.region_status[EAST].state == "running"


@pytest.fixture
def east_ssm(moto: MotoServer) -> SsmParameters:
    return SsmParameters(aws.client("ssm", region=EAST, endpoint_url=moto.url))


def patched_sweep_entry(
    local: LocalReconcilers, store: EndpointStore, ssm: SsmParameters, monkeypatch: pytest.MonkeyPatch
) -> Any:
    """The sweep Lambda's module, its reconciler and heartbeat those of the local stack's EAST."""
    from lambdas import sweep as entry

    monkeypatch.setattr(entry, "reconciler", LazyReconciler(lambda: local.regions[EAST].reconciler))
    monkeypatch.setattr(entry, "heartbeat", lambda: HeartbeatWriter(ssm, store.table_name, 300.0))
    return entry


def test_sweep_lambda_reports_and_beats(
    store: EndpointStore, local: LocalReconcilers, east_ssm: SsmParameters, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = patched_sweep_entry(local, store, east_ssm, monkeypatch)
    store.create("llama", {"image": IMAGE}, [EAST])
    event = json.loads((EVENTS / "scheduled_sweep.json").read_text())
    report = entry.handler(event, Context(function_name="gco-sweep"))
    assert (report["endpoints"], report["done"], report["failed"], report["heartbeat"]) == (1, 1, [], True)
    beat = read_heartbeat(east_ssm, store.table_name, EAST)
    assert beat is not None and beat.every_s == 300.0


def test_the_sweep_lambda_deletes_a_matrix_endpoint_past_its_deadline(
    store: EndpointStore, local: LocalReconcilers, east_ssm: SsmParameters, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = patched_sweep_entry(local, store, east_ssm, monkeypatch)
    past, future = str(int(time.time()) - 1), str(int(time.time()) + 3600)
    store.create("mx-r1-vllm-hpa", {"image": IMAGE}, [EAST], labels={OWNER_LABEL: "r1", DEADLINE_LABEL: past})
    store.create(
        "mx-r2-vllm-hpa", {"image": IMAGE}, [EAST], labels={OWNER_LABEL: "r2", DEADLINE_LABEL: future}
    )
    entry.handler(
        json.loads((EVENTS / "scheduled_sweep.json").read_text()), Context(function_name="gco-sweep")
    )
    expired, live = store.get("mx-r1-vllm-hpa"), store.get("mx-r2-vllm-hpa")
    assert expired is not None and expired.desired_state == "deleted"  # the reconciler purges it next
    assert live is not None and live.desired_state == "deploying"


def test_entry_points_build_their_reconciler_once_on_first_use() -> None:
    from lambdas import reconciler as stream_entry
    from lambdas import sweep as sweep_entry

    assert isinstance(stream_entry.reconciler, LazyReconciler)
    assert isinstance(sweep_entry.reconciler, LazyReconciler)
    built: list[Reconciler] = []

    def build() -> Reconciler:
        built.append(Mock(spec=Reconciler))  # a stand-in: what matters is when and how often it is built
        return built[-1]

    lazy = LazyReconciler(build)
    assert built == []
    assert lazy() is lazy() is built[0]
    assert len(built) == 1


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({}, "EKS_CLUSTER_NAME"),
        ({"EKS_CLUSTER_NAME": "gco"}, "RECONCILER_REGION"),
        (
            {"EKS_CLUSTER_NAME": "gco", "AWS_REGION": "us-east-1", "RECONCILE_WAIT_SECONDS": "soon"},
            "RECONCILE_WAIT_SECONDS",
        ),
        (
            {"EKS_CLUSTER_NAME": "gco", "AWS_REGION": "us-east-1", "RECONCILE_WAIT_SECONDS": "900"},
            "RECONCILE_WAIT_SECONDS",
        ),
        (
            {
                "EKS_CLUSTER_NAME": "gco",
                "AWS_REGION": "us-east-1",
                "GCO_PROXY_SETTINGS": '{"cpu_request": "1"}',
            },
            "GCO_PROXY_SETTINGS",
        ),
    ],
)
def test_bad_environment_names_the_variable(env: dict[str, str], field: str) -> None:
    with pytest.raises(InvalidSpecError) as caught:
        reconciler_from_env(env)
    assert caught.value.field == field


def test_environment_reaches_eks(moto: MotoServer, dynamodb: Any) -> None:
    with pytest.raises(ClusterConfigError, match="DescribeCluster gco"):
        reconciler_from_env(
            {
                "EKS_CLUSTER_NAME": "gco",
                "RECONCILER_REGION": "us-east-1",
                "RECONCILE_WAIT_SECONDS": "",
                "GCO_PROXY_SETTINGS": '{"cpu_request": "500m"}',
            }
        )


def test_the_regions_addons_reach_the_renderer_settings(
    moto: MotoServer, dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stack's GCO_CLUSTER_ADDONS (gco.reconcile.addons) becomes the reconciler's view of its Region."""
    import gco.reconcile.eks

    monkeypatch.setattr(gco.reconcile.eks, "connect_eks", lambda name, region: object())
    env = {"EKS_CLUSTER_NAME": "gco", "RECONCILER_REGION": "us-east-1"}
    assert reconciler_from_env(env).settings.addons is None  # not said: nothing refused up front
    built = reconciler_from_env({**env, "GCO_CLUSTER_ADDONS": "metrics-server,keda"})
    assert built.settings.addons == frozenset({"metrics-server", "keda"})
