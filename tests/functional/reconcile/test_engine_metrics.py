"""Time to first token read from the Region's Prometheus through the API server's pod proxy: the real
cluster client (`KubeCluster`) against the stand-in API server over HTTP, with the reconciler's own
grant (list of Pods and get of `pods/proxy` in gco-system, no new rule)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from gco.local.standin import RUNNER_IDENTITY, StandInKubeAPI
from gco.reconcile.addons import PROMETHEUS_NAMESPACE, PROMETHEUS_SERVER_LABELS
from gco.reconcile.engine_metrics import (
    ENDPOINT_SERIES_LABEL,
    PROMETHEUS_PORT,
    QUERY_PATH,
    TTFT_P50_METRIC,
    TTFT_P99_METRIC,
    TTFT_QUANTILES,
    read_ttft,
    ttft_query,
)
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token

FAST = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.001)
RUNNER = "runner-token"


@pytest.fixture
def api() -> Iterator[StandInKubeAPI]:
    with StandInKubeAPI(
        token="t", identities={RUNNER: RUNNER_IDENTITY}, namespaces=[PROMETHEUS_NAMESPACE]
    ) as server:
        yield server


@pytest.fixture
def cluster(api: StandInKubeAPI) -> Iterator[KubeCluster]:
    client = KubeCluster(api.url, static_token("t"), retry=FAST, sleep=lambda _: None)
    yield client
    client.close()


def server_pod(name: str, ready: bool = True) -> dict[str, Any]:
    """The Prometheus chart's server pod as the API server lists it (its labels and Ready condition)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": PROMETHEUS_NAMESPACE,
            "labels": dict(PROMETHEUS_SERVER_LABELS),
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]},
    }


class PrometheusAnswers:
    """Stands in for the Prometheus server's HTTP API (`GET /api/v1/query`, "Instant queries"): it
    answers each known query with a fixed instant vector in the documented JSON shape. It does not
    evaluate PromQL; it checks that the query asked is exactly the one the reader means."""

    def __init__(self, vectors: dict[str, dict[str, str]]) -> None:
        self.vectors = vectors  # query -> endpoint -> value as Prometheus writes it ("NaN" included)
        self.asked: list[tuple[int, str]] = []

    def __call__(self, port: int, path: str) -> tuple[int, str]:
        self.asked.append((port, path))
        url = urlsplit(path)
        (query,) = parse_qs(url.query)["query"]
        if url.path != QUERY_PATH or query not in self.vectors:
            return 400, json.dumps({"status": "error", "errorType": "bad_data", "error": "unknown query"})
        result = [
            {"metric": {ENDPOINT_SERIES_LABEL: name, "le": "+Inf"}, "value": [1733250000.0, value]}
            for name, value in self.vectors[query].items()
        ]
        return 200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def test_each_quantile_is_asked_of_a_ready_server_and_nan_is_left_out(
    api: StandInKubeAPI, cluster: KubeCluster
) -> None:
    answers = PrometheusAnswers(
        {
            ttft_query(0.5): {"chat": "0.125", "idle": "NaN"},
            ttft_query(0.99): {"chat": "0.9", "idle": "NaN"},
        }
    )
    api.register_pod(server_pod("prometheus-server-0", ready=False), answers)
    api.register_pod(server_pod("prometheus-server-1"), answers)
    reading = read_ttft(cluster)
    assert reading.problem is None
    assert reading.values == {TTFT_P50_METRIC: {"chat": 0.125}, TTFT_P99_METRIC: {"chat": 0.9}}
    assert [port for port, _ in answers.asked] == [PROMETHEUS_PORT] * len(TTFT_QUANTILES)


def test_no_server_or_a_refused_query_is_named_and_nothing_raises(
    api: StandInKubeAPI, cluster: KubeCluster
) -> None:
    assert read_ttft(cluster).problem == "no Prometheus server pod is ready"
    api.register_pod(server_pod("prometheus-server-0"), PrometheusAnswers({}))
    reading = read_ttft(cluster)
    assert reading.values == {}
    assert (
        reading.problem is not None and "HTTP 400" in reading.problem and "unknown query" in reading.problem
    )


def test_an_identity_without_the_pod_proxy_grant_gets_a_problem_not_an_error(api: StandInKubeAPI) -> None:
    api.register_pod(server_pod("prometheus-server-0"), PrometheusAnswers({}))
    runner = KubeCluster(api.url, static_token(RUNNER), retry=FAST, sleep=lambda _: None)
    try:
        reading = read_ttft(runner)
    finally:
        runner.close()
    assert reading.values == {} and reading.problem is not None and "403" in reading.problem
