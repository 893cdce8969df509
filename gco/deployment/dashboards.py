"""The CloudWatch dashboards of a deployment, as dashboard bodies (plain JSON, no CDK): one per Region
(`<prefix>-<region>`) and one across Regions (`<prefix>-regions`). The stacks write them
(`stacks/constructs/dashboards.py`); `gco.deployment.dashboard_page` renders one as a page to look at.

Where each figure comes from (CloudWatch dashboard body structure, "Dashboard Body Structure and
Syntax", CloudWatch API reference):

- **Requests, errors, latency p50/p99 of the Region's front door**: API Gateway's own metrics of a
  REST API stage, namespace `AWS/ApiGateway`, `Count`, `4XXError`, `5XXError`, `Latency`, dimensions
  `ApiName` and `Stage` ("Amazon API Gateway dimensions and metrics", developer guide). They cannot be
  split by endpoint: every endpoint is the one resource `/inference/{proxy+}`.
- **The same, per endpoint**: the front door's access log (one JSON line per request, with `path`,
  `status` and `latency`: `stacks/constructs/front_door.py` ACCESS_LOG_FORMAT), read by a CloudWatch
  Logs Insights widget that takes the endpoint from the path (`/<stage>/inference/<name>/...`). It
  costs no metric; Logs Insights reads one Region's logs, so these widgets are on the Regional
  dashboards.
- **Replicas ready per endpoint**, and the endpoints short of ready: the sweep publishes them as
  embedded metric format records (`gco.reconcile.replica_metrics`, namespace `gco`, dimensions
  `service` and `endpoint`); a `SEARCH` expression draws every endpoint there is.
- **Time to first token and GPU utilisation**: the engines report TTFT on their Prometheus endpoint
  (vLLM's `vllm:time_to_first_token_seconds` histogram; TGI reports no TTFT metric) and the DCGM
  exporter GPU utilisation (`DCGM_FI_DEV_GPU_UTIL`), both scraped by the cluster's Prometheus server
  where `keda_regions` installs it. None of it reaches CloudWatch today: the dashboard says so and
  where to read them (docs/deploy.md, "Dashboards", says what would bring them over).
"""

from __future__ import annotations

from typing import Any

from gco.engines.vllm import TTFT_METRIC
from gco.reconcile.failures import METRICS_NAMESPACE, SWEEP_SERVICE
from gco.reconcile.replica_metrics import (
    ENDPOINT_DIMENSION,
    NOT_READY_METRIC,
    REPLICAS_DESIRED_METRIC,
    REPLICAS_READY_METRIC,
)

API_NAMESPACE = "AWS/ApiGateway"
API_METRICS = ("Count", "4XXError", "5XXError", "Latency")
PERIOD = 300
WIDTH = 24
# The engine metrics that stay in the cluster's Prometheus (named on the dashboards, not drawn).
GPU_UTILISATION = "DCGM_FI_DEV_GPU_UTIL"  # the DCGM exporter's, which KEDA's `gpu` trigger reads too
PROMETHEUS_ONLY = {
    "time to first token": f"{TTFT_METRIC} (vLLM; TGI and SGLang: see docs/deploy.md)",
    "GPU utilisation": f"{GPU_UTILISATION} (DCGM exporter)",
}


def _metric(
    title: str, region: str, metrics: list[list[Any]], *, stat: str = "Sum", width: int = 12
) -> dict[str, Any]:
    return {
        "type": "metric",
        "width": width,
        "height": 6,
        "properties": {
            "title": title,
            "region": region,
            "metrics": metrics,
            "stat": stat,
            "period": PERIOD,
            "view": "timeSeries",
        },
    }


def front_door_widgets(region: str, api_name: str, stage: str, label: str = "") -> list[dict[str, Any]]:
    """Requests and errors, and latency p50/p99, of one Region's front door."""
    dims = ["ApiName", api_name, "Stage", stage]
    prefix = f"{label}: " if label else ""
    counts = [[API_NAMESPACE, name, *dims, {"region": region}] for name in ("Count", "4XXError", "5XXError")]
    latency = [
        [API_NAMESPACE, "Latency", *dims, {"stat": stat, "label": f"Latency {stat}", "region": region}]
        for stat in ("p50", "p99")
    ]
    return [
        _metric(f"{prefix}front door requests and errors", region, counts),
        _metric(f"{prefix}front door latency (ms)", region, latency, stat="p50"),
    ]


def replica_widgets(region: str, label: str = "") -> list[dict[str, Any]]:
    """Replicas ready and desired of every endpoint (a SEARCH over the sweep's metrics), and the number
    of endpoints short of ready."""
    prefix = f"{label}: " if label else ""
    schema = f"{{{METRICS_NAMESPACE},{ENDPOINT_DIMENSION},service}}"

    def search(metric: str, ident: str) -> list[Any]:
        expression = f"SEARCH('{schema} MetricName=\"{metric}\"', 'Maximum', {PERIOD})"
        return [{"expression": expression, "id": ident, "region": region, "label": metric}]

    not_ready = [METRICS_NAMESPACE, NOT_READY_METRIC, "service", SWEEP_SERVICE, {"region": region}]
    return [
        _metric(
            f"{prefix}replicas ready per endpoint",
            region,
            [search(REPLICAS_READY_METRIC, "ready"), search(REPLICAS_DESIRED_METRIC, "desired")],
            stat="Maximum",
        ),
        _metric(f"{prefix}endpoints not ready", region, [not_ready], stat="Maximum"),
    ]


def endpoint_log_queries(stage: str) -> dict[str, str]:
    """Logs Insights over the access log, per endpoint: requests by status class (2, 4, 5 for 2xx,
    4xx, 5xx), and latency p50 and p99 (ms). The endpoint is the path's segment after `inference`;
    comparisons only filter, and arithmetic makes the class (Logs Insights QL, "Boolean, comparison,
    numeric, datetime, and other functions")."""
    endpoint = f"parse path '/{stage}/inference/*/*' as endpoint, rest | filter ispresent(endpoint)"
    return {
        "per endpoint: requests by status class (front door access log)": (
            f"fields path, status | {endpoint} | fields floor(status / 100) as status_class"
            " | stats count(*) as requests by endpoint, status_class | sort endpoint, status_class"
        ),
        "per endpoint: latency p50 and p99 in ms (front door access log)": (
            f"fields path, latency | {endpoint}"
            " | stats pct(latency, 50) as p50_ms, pct(latency, 99) as p99_ms, count(*) as requests"
            " by endpoint | sort requests desc"
        ),
    }


def endpoint_log_widgets(region: str, log_group: str, stage: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "log",
            "width": WIDTH // 2,
            "height": 8,
            "properties": {
                "title": title,
                "region": region,
                "query": f"SOURCE '{log_group}' | {query}",
                "view": "table",
            },
        }
        for title, query in endpoint_log_queries(stage).items()
    ]


def prometheus_note() -> dict[str, Any]:
    lines = [f"- **{what}**: `{metric}`" for what, metric in PROMETHEUS_ONLY.items()]
    return {
        "type": "text",
        "width": WIDTH,
        "height": 3,
        "properties": {
            "markdown": "In the cluster's Prometheus (`prometheus-server.gco-system`), not in CloudWatch:\n"
            + "\n".join(lines)
        },
    }


def regional_dashboard(*, region: str, api_name: str, stage: str, access_log_group: str) -> dict[str, Any]:
    """One Region: its front door, per endpoint from its access log, its endpoints' replicas."""
    return {
        "widgets": [
            *front_door_widgets(region, api_name, stage),
            *endpoint_log_widgets(region, access_log_group, stage),
            *replica_widgets(region),
            prometheus_note(),
        ]
    }


def global_dashboard(*, api_names: dict[str, str], stage: str) -> dict[str, Any]:
    """Every Region side by side: each front door and each Region's endpoints' replicas."""
    widgets: list[dict[str, Any]] = []
    for region, api_name in api_names.items():
        widgets += front_door_widgets(region, api_name, stage, label=region)
        widgets += replica_widgets(region, label=region)
    return {"widgets": [*widgets, prometheus_note()]}


def metric_references(body: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    """(namespace, metric name, dimensions) of every metric a body draws, SEARCH expressions included
    (their schema's namespace and dimension names, with the dimension values `*`)."""
    found: list[tuple[str, str, dict[str, str]]] = []
    for widget in body["widgets"]:
        for line in widget.get("properties", {}).get("metrics", []):
            for item in line:
                if isinstance(item, dict) and "expression" in item:
                    schema, name = _search_parts(str(item["expression"]))
                    found.append((schema[0], name, dict.fromkeys(schema[1:], "*")))
            if line and isinstance(line[0], str):
                plain = [part for part in line if isinstance(part, str)]
                namespace, name, rest = plain[0], plain[1], plain[2:]
                found.append((namespace, name, dict(zip(rest[::2], rest[1::2], strict=True))))
    return found


def _search_parts(expression: str) -> tuple[list[str], str]:
    schema = expression[expression.index("{") + 1 : expression.index("}")].split(",")
    name = expression.split('MetricName="', 1)[1].split('"', 1)[0]
    return schema, name
