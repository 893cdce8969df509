"""The sweep Lambda end to end for time to first token: its handler, over the local Region's real
cluster client and stand-in API server, asks the Region's Prometheus server (registered as a pod of
gco-system) through the pod proxy and prints each endpoint's p50 and p99 as EMF records.

It runs the reconciler library in this process (`local`): it calls each Region's in-process reconciler
directly."""

from __future__ import annotations

import json

import pytest

from gco.endpoints import EndpointStore
from gco.local.region.reconcilers import LocalReconcilers
from gco.reconcile.engine_metrics import TTFT_P50_METRIC, TTFT_P99_METRIC, ttft_query
from gco.reconcile.failures import METRICS_NAMESPACE
from gco.reconcile.runtime import LazyReconciler
from tests.functional.reconcile.test_engine_metrics import PrometheusAnswers, server_pod
from tests.functional.reconcile.test_lambdas import EVENTS, Context
from tests.unit.reconcile.records import EAST, IMAGE


def test_the_sweep_lambda_prints_ttft_read_from_the_region_s_prometheus(
    store: EndpointStore,
    local: LocalReconcilers,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    from lambdas import sweep as entry

    monkeypatch.setattr(entry, "reconciler", LazyReconciler(lambda: local.regions[EAST].reconciler))
    monkeypatch.setattr(entry, "heartbeat", lambda: None)
    store.create("llama", {"image": IMAGE}, [EAST])
    answers = PrometheusAnswers({ttft_query(0.5): {"llama": "0.2"}, ttft_query(0.99): {"llama": "1.5"}})
    local.regions[EAST].api.register_pod(server_pod("prometheus-server-0"), answers)
    capsys.readouterr()
    entry.handler(
        json.loads((EVENTS / "scheduled_sweep.json").read_text()), Context(function_name="gco-sweep")
    )
    printed = {}
    for line in capsys.readouterr().out.splitlines():
        record = json.loads(line) if line.startswith("{") and "_aws" in line else {}
        for directive in record.get("_aws", {}).get("CloudWatchMetrics", []):
            for metric in directive["Metrics"]:
                if metric["Name"] in (TTFT_P50_METRIC, TTFT_P99_METRIC):
                    key = (directive["Namespace"], record["endpoint"], metric["Name"])
                    printed[key] = record[metric["Name"]]
    assert printed == {
        (METRICS_NAMESPACE, "llama", TTFT_P50_METRIC): [0.2],
        (METRICS_NAMESPACE, "llama", TTFT_P99_METRIC): [1.5],
    }
    assert len(answers.asked) == 2
