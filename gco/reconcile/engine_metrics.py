"""Time to first token per endpoint, read from the Region's Prometheus for CloudWatch.

Why here: vLLM reports TTFT as a Prometheus histogram, `vllm:time_to_first_token_seconds` (docs.vllm.ai,
"Production Metrics"; `gco.engines.vllm.TTFT_METRIC`), and the CloudWatch agent's Prometheus scraping
drops histograms ("Prometheus metric type conversion by the CloudWatch agent", CloudWatch User Guide:
"The Prometheus metrics with the unsupported histogram metric type are dropped"; the agent's
`plugins/inputs/prometheus/metrics_filter.go` keeps gauges, counters and summaries only). The
cluster's Prometheus server already scrapes every endpoint pod's /metrics (its chart's
`kubernetes-pods` job, through the pods' `prometheus.io/*` annotations; the endpoint's NetworkPolicy
admits it, `render_network.py`), so each sweep asks it for the quantiles and the sweep Lambda prints
them as embedded metric format records, as it does the replica counts (`lambdas/sweep.py`). TGI has
no such metric: its metrics reference (huggingface.co/docs/text-generation-inference/reference/metrics)
lists request histograms (`tgi_request_duration`, `tgi_request_queue_duration`,
`tgi_request_inference_duration`, ...), none of them to the first token. SGLang reports the same
histogram as `sglang:time_to_first_token_seconds` (docs.sglang.ai "Production Metrics"; gco launches
it with `--enable-metrics`, `gco.engines.sglang`): the query takes both, by metric name.

The query (Prometheus, "Query functions", `histogram_quantile`): the `q`-quantile of the bucket rates
over the last `WINDOW`, summed over an endpoint's pods, by the endpoint's pod label. The chart's job
copies each pod label onto the series (`labelmap` of `__meta_kubernetes_pod_label_(.+)`), and
Kubernetes service discovery writes a label's name "with any unsupported characters converted to an
underscore" (Prometheus configuration, `kubernetes_sd_config`, role pod): `gco.dev/endpoint` becomes
`gco_dev_endpoint`. An endpoint with no request in the window has a rate of 0 in every bucket, for
which `histogram_quantile` answers NaN: no figure is published for it.

How it is asked: the Prometheus server's HTTP API (`GET /api/v1/query`, Prometheus "HTTP API",
"Instant queries") on its pod's port 9090 (the chart's `containerPort: 9090`), through the API
server's pod proxy (`PodProxyCluster.proxy_get`), the way the route probe reaches the proxy's pods: the
reconciler already holds `list` of Pods and `get` of `pods/proxy` in `gco-system`, where the chart runs
the server (`gco.reconcile.addons.PROMETHEUS_NAMESPACE`), so no grant and no network path is added.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlencode

from gco.engines import sglang, vllm
from gco.reconcile.addons import PROMETHEUS_NAMESPACE, PROMETHEUS_SERVER_LABELS
from gco.reconcile.errors import ClusterError, MetricsAnswerError
from gco.reconcile.objects import ENDPOINT_LABEL, POD, Kind

log = logging.getLogger(__name__)

TTFT_P50_METRIC = "TimeToFirstTokenP50"
TTFT_P99_METRIC = "TimeToFirstTokenP99"
# metric -> quantile
TTFT_QUANTILES = {TTFT_P50_METRIC: 0.5, TTFT_P99_METRIC: 0.99}
WINDOW = "5m"
PROMETHEUS_PORT = 9090
QUERY_PATH = "/api/v1/query"


def series_label(pod_label: str) -> str:
    """The name a pod label has on the scraped series (module docstring: unsupported characters of a
    Prometheus label name, anything but `[a-zA-Z0-9_]`, become `_`)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", pod_label)


ENDPOINT_SERIES_LABEL = series_label(ENDPOINT_LABEL)


# The engines' TTFT histograms (seconds); an endpoint runs one engine, so its buckets come from one.
TTFT_METRICS = (vllm.TTFT_METRIC, sglang.TTFT_METRIC)


def ttft_query(quantile: float) -> str:
    """The PromQL of the endpoints' TTFT `quantile` (seconds) over the last `WINDOW`: the bucket
    series of every engine's histogram, selected by name (`__name__`, the metric name's label)."""
    by = f"le, {ENDPOINT_SERIES_LABEL}"
    # Metric names hold only `[a-zA-Z0-9_:]` (Prometheus "Data model"): nothing to escape in a regex.
    names = "|".join(f"{metric}_bucket" for metric in TTFT_METRICS)
    buckets = f'{{__name__=~"{names}"}}'
    return f"histogram_quantile({quantile}, sum by ({by}) (rate({buckets}[{WINDOW}])))"


def parse_vector(body: str) -> dict[str, float]:
    """endpoint -> value of an instant-vector answer (Prometheus HTTP API: `{"status": "success",
    "data": {"resultType": "vector", "result": [{"metric": {...}, "value": [<time>, "<value>"]}]}}`),
    without NaN or infinite values and series without the endpoint label.

    Raises:
        MetricsAnswerError: the body is not JSON, not a success, or not a vector.
    """
    try:
        answer = json.loads(body)
    except ValueError as error:
        raise MetricsAnswerError(f"not JSON: {error}") from error
    if not isinstance(answer, dict) or answer.get("status") != "success":
        error_text = answer.get("error") if isinstance(answer, dict) else None
        raise MetricsAnswerError(f"the query did not succeed: {error_text or str(answer)[:200]}")
    data = answer.get("data") or {}
    if data.get("resultType") != "vector":
        raise MetricsAnswerError(f"expected a vector, got {data.get('resultType')!r}")
    values: dict[str, float] = {}
    for series in data.get("result") or []:
        endpoint = (series.get("metric") or {}).get(ENDPOINT_SERIES_LABEL)
        try:
            value = float(series["value"][1])
        except (KeyError, IndexError, TypeError, ValueError) as error:
            raise MetricsAnswerError(f"a sample without a value: {series!r}") from error
        if endpoint and math.isfinite(value):
            values[str(endpoint)] = value
    return values


@dataclass
class TtftReading:
    """metric (`TTFT_QUANTILES`) -> endpoint -> seconds, and why some or all could not be read."""

    values: dict[str, dict[str, float]] = field(default_factory=dict)
    problem: str | None = None


@runtime_checkable
class PodProxyCluster(Protocol):
    """What the reading needs of the cluster client (`gco.reconcile.kubeapi`)."""

    def list_in(self, kind: Kind, namespace: str, labels: Mapping[str, str]) -> list[dict[str, Any]]: ...

    def proxy_get(self, namespace: str, pod: str, port: int, path: str) -> tuple[int, str]: ...


def _running(pod: Mapping[str, Any]) -> bool:
    """A pod not being deleted whose Ready condition is True."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def read_ttft(cluster: PodProxyCluster) -> TtftReading:
    """Each endpoint's TTFT quantiles from the Region's Prometheus server (module docstring). Never
    raises: what could not be read is named in `problem` (the sweep goes on without the figures)."""
    reading = TtftReading()
    try:
        listed = cluster.list_in(POD, PROMETHEUS_NAMESPACE, PROMETHEUS_SERVER_LABELS)
        pods = [pod for pod in listed if _running(pod)]
    except ClusterError as error:
        reading.problem = f"could not list the Prometheus server: {error}"
        return reading
    if not pods:
        reading.problem = "no Prometheus server pod is ready"
        return reading
    server = str(pods[0]["metadata"]["name"])
    for metric, quantile in TTFT_QUANTILES.items():
        path = f"{QUERY_PATH}?{urlencode({'query': ttft_query(quantile)})}"
        where = f"{metric} from {PROMETHEUS_NAMESPACE}/{server}"
        problem = None
        try:
            status, body = cluster.proxy_get(PROMETHEUS_NAMESPACE, server, PROMETHEUS_PORT, path)
            if status == 200:
                reading.values[metric] = parse_vector(body)
            else:
                problem = f"{where}: HTTP {status}: {body[:200]}"
        except (ClusterError, MetricsAnswerError) as error:
            problem = f"{where}: {error}"
        if problem is not None:
            reading.problem = problem
            log.warning("time to first token not read: %s", problem)
    return reading
