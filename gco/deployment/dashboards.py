"""The CloudWatch dashboards of a deployment, as dashboard bodies (plain JSON, no CDK): one per Region
(`<prefix>-<region>`) and one across Regions (`<prefix>-regions`). The stacks write them
(`stacks/constructs/dashboards.py`); `gco.deployment.dashboard_page` renders one as a page to look at.

Where each figure comes from (CloudWatch dashboard body structure, "Dashboard Body Structure and
Syntax", CloudWatch API reference):

- **Requests, errors, latency p50/p99 of the Region's front door**: API Gateway's own metrics of a
  REST API stage, namespace `AWS/ApiGateway`, `Count`, `4XXError`, `5XXError`, `Latency`, dimensions
  `ApiName` and `Stage` ("Amazon API Gateway dimensions and metrics", developer guide). They cannot be
  split by endpoint: every endpoint is the one resource `/inference/{proxy+}`.
- **The same, of the global address** (only when one is configured, `docs/global.md`): each Region's
  global REST API, which carries the keyed traffic (`Authorization: Bearer`) through its authorizer
  to the same proxy, has its own `ApiName` (`<prefix>-global-<region>`) and the same stage; its
  latency includes the authorizer's. Its 5xx are the authorizer's failures as callers see them.
- **The same, per endpoint**: the front door's access log (one JSON line per request, with `path`,
  `status` and `latency`: `stacks/constructs/front_door.py` ACCESS_LOG_FORMAT), read by a CloudWatch
  Logs Insights widget that takes the endpoint from the path (`/<stage>/inference/<name>/...`). It
  costs no metric; Logs Insights reads one Region's logs, so these widgets are on the Regional
  dashboards.
- **Replicas ready per endpoint**, and the endpoints short of ready: the sweep publishes them as
  embedded metric format records (`gco.reconcile.replica_metrics`, namespace `gco`, dimensions
  `service` and `endpoint`); a `SEARCH` expression draws every endpoint there is.
- **Time to first token p50/p99 per endpoint**: vLLM reports it as the Prometheus histogram
  `vllm:time_to_first_token_seconds`; the CloudWatch agent drops histograms, so each sweep asks the
  Region's Prometheus server for the quantiles and prints them as EMF records beside the replicas
  (`gco.reconcile.engine_metrics`; namespace `gco`, `TimeToFirstTokenP50` and `TimeToFirstTokenP99` in
  seconds, dimensions `service` and `endpoint`). TGI and SGLang endpoints have no line (docs/deploy.md).
- **GPU utilisation per endpoint and per Region**: the Amazon CloudWatch Observability EKS add-on's
  agent, from its DCGM exporter (`gco.deployment.container_insights`; namespace `ContainerInsights`,
  `pod_gpu_utilization` by `ClusterName`, `Namespace`, `Service`, which is the endpoint's Service, and
  `node_gpu_utilization` by `ClusterName`).

`metric_references` lists what a body draws; the tests hold each against what its collector emits.
"""

from __future__ import annotations

import re
from typing import Any

from gco.deployment import container_insights as ci
from gco.reconcile.engine_metrics import TTFT_QUANTILES
from gco.reconcile.failures import METRICS_NAMESPACE, SWEEP_SERVICE
from gco.reconcile.replica_metrics import (
    ENDPOINT_DIMENSION,
    NOT_READY_METRIC,
    REPLICAS_DESIRED_METRIC,
    REPLICAS_READY_METRIC,
)

API_NAMESPACE = "AWS/ApiGateway"
FIVE_XX_METRIC = "5XXError"
COUNT_METRICS = ("Count", "4XXError", FIVE_XX_METRIC)
API_METRICS = (*COUNT_METRICS, "Latency")
PERIOD = 300
WIDTH = 24


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


def _api_widgets(region: str, api_name: str, stage: str, *, what: str, label: str) -> list[dict[str, Any]]:
    """Requests and errors, and latency p50/p99, of one REST API stage, titled `what`."""
    dims = ["ApiName", api_name, "Stage", stage]
    prefix = f"{label}: " if label else ""
    counts = [[API_NAMESPACE, name, *dims, {"region": region}] for name in COUNT_METRICS]
    latency = [
        [API_NAMESPACE, "Latency", *dims, {"stat": stat, "label": f"Latency {stat}", "region": region}]
        for stat in ("p50", "p99")
    ]
    return [
        _metric(f"{prefix}{what} requests and errors", region, counts),
        _metric(f"{prefix}{what} latency (ms)", region, latency, stat="p50"),
    ]


def front_door_widgets(region: str, api_name: str, stage: str, label: str = "") -> list[dict[str, Any]]:
    """Requests and errors, and latency p50/p99, of one Region's front door (SigV4 callers)."""
    return _api_widgets(region, api_name, stage, what="front door", label=label)


def global_address_widgets(region: str, api_name: str, stage: str, label: str = "") -> list[dict[str, Any]]:
    """The same of one Region's global API (bearer-key callers, through the authorizer)."""
    return _api_widgets(region, api_name, stage, what="global address", label=label)


def _search(
    namespace: str,
    dimensions: tuple[str, ...],
    metric: str,
    stat: str,
    ident: str,
    region: str,
    *,
    per: str,
    what: str,
    **fixed: str,
) -> list[Any]:
    """A SEARCH expression line: every metric `metric` of that exact dimension set (the schema), those
    of `fixed` dimension values only (CloudWatch, "CloudWatch search expression syntax"). Each line it
    returns is labelled by its dimension `per` and `what` (a dynamic label, `${PROP('Dim.<name>')}`,
    applies to every metric a search returns: CloudWatch, "Use dynamic labels")."""
    terms = " ".join(f'{key}="{value}"' for key, value in fixed.items())
    query = f'{{{namespace},{",".join(dimensions)}}} MetricName="{metric}"' + (f" {terms}" if terms else "")
    expression = f"SEARCH('{query}', '{stat}', {PERIOD})"
    label = f"${{PROP('Dim.{per}')}} {what}"
    return [{"expression": expression, "id": ident, "region": region, "label": label}]


def replica_widgets(region: str, label: str = "") -> list[dict[str, Any]]:
    """Replicas ready and desired of every endpoint (a SEARCH over the sweep's metrics), and the number
    of endpoints short of ready."""
    prefix = f"{label}: " if label else ""
    dims = (ENDPOINT_DIMENSION, "service")
    not_ready = [METRICS_NAMESPACE, NOT_READY_METRIC, "service", SWEEP_SERVICE, {"region": region}]
    return [
        _metric(
            f"{prefix}replicas ready per endpoint",
            region,
            [
                _search(
                    METRICS_NAMESPACE,
                    dims,
                    REPLICAS_READY_METRIC,
                    "Maximum",
                    "ready",
                    region,
                    per=ENDPOINT_DIMENSION,
                    what="ready",
                ),
                _search(
                    METRICS_NAMESPACE,
                    dims,
                    REPLICAS_DESIRED_METRIC,
                    "Maximum",
                    "desired",
                    region,
                    per=ENDPOINT_DIMENSION,
                    what="desired",
                ),
            ],
            stat="Maximum",
        ),
        _metric(f"{prefix}endpoints not ready", region, [not_ready], stat="Maximum"),
    ]


def ttft_widget(region: str, label: str = "") -> dict[str, Any]:
    """Time to first token p50 and p99 (seconds) of every endpoint whose engine reports it, as the
    sweep prints them (a SEARCH over namespace `gco`)."""
    prefix = f"{label}: " if label else ""
    dims = (ENDPOINT_DIMENSION, "service")
    lines = [
        _search(
            METRICS_NAMESPACE,
            dims,
            metric,
            "Maximum",
            metric.lower(),
            region,
            per=ENDPOINT_DIMENSION,
            what=f"p{round(quantile * 100)}",
        )
        for metric, quantile in TTFT_QUANTILES.items()
    ]
    return _metric(f"{prefix}time to first token per endpoint (s)", region, lines, stat="Maximum")


def gpu_widgets(region: str, cluster_name: str, label: str = "") -> list[dict[str, Any]]:
    """GPU utilisation (%) of each endpoint's pods (a SEARCH over the Region's cluster, one line per
    endpoint's Service) and of the Region's GPU nodes (average and busiest), from Container Insights."""
    prefix = f"{label}: " if label else ""
    per_endpoint = _search(
        ci.NAMESPACE,
        ci.ENDPOINT_GPU_DIMENSIONS,
        ci.POD_GPU_UTILISATION,
        "Average",
        "gpu",
        region,
        per=ci.SERVICE_DIMENSION,
        what="GPU %",
        **{ci.CLUSTER_DIMENSION: cluster_name},
    )
    node = [ci.NAMESPACE, ci.NODE_GPU_UTILISATION, ci.CLUSTER_DIMENSION, cluster_name]
    nodes = [
        [*node, {"stat": stat, "label": f"GPU nodes {stat.lower()}", "region": region}]
        for stat in ("Average", "Maximum")
    ]
    return [
        _metric(f"{prefix}GPU utilisation per endpoint (%)", region, [per_endpoint], stat="Average"),
        _metric(f"{prefix}GPU utilisation of the Region's GPU nodes (%)", region, nodes, stat="Average"),
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


def regional_dashboard(
    *,
    region: str,
    api_name: str,
    stage: str,
    access_log_group: str,
    cluster_name: str,
    global_api_name: str | None = None,
) -> dict[str, Any]:
    """One Region: its front door and, with a global address, its global API (`global_api_name`), per
    endpoint from the front door's access log, its endpoints' replicas, time to first token and GPU
    utilisation, and its GPU nodes'."""
    keyed = global_address_widgets(region, global_api_name, stage) if global_api_name else []
    return {
        "widgets": [
            *front_door_widgets(region, api_name, stage),
            *keyed,
            *endpoint_log_widgets(region, access_log_group, stage),
            *replica_widgets(region),
            ttft_widget(region),
            *gpu_widgets(region, cluster_name),
        ]
    }


def global_dashboard(
    *,
    api_names: dict[str, str],
    cluster_names: dict[str, str],
    stage: str,
    global_api_names: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Every Region side by side: each front door and, with a global address, each global API
    (`global_api_names`: Region -> its name), and each Region's endpoints' replicas, time to first
    token and GPU utilisation (`cluster_names`: Region -> its cluster's name)."""
    widgets: list[dict[str, Any]] = []
    for region, api_name in api_names.items():
        widgets += front_door_widgets(region, api_name, stage, label=region)
        if global_api_names:
            widgets += global_address_widgets(region, global_api_names[region], stage, label=region)
        widgets += replica_widgets(region, label=region)
        widgets += [
            ttft_widget(region, label=region),
            *gpu_widgets(region, cluster_names[region], label=region),
        ]
    return {"widgets": widgets}


def metric_references(body: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    """(namespace, metric name, dimensions) of every metric a body draws, SEARCH expressions included
    (their schema's namespace and dimension names, each with the value the expression fixes or `*`)."""
    found: list[tuple[str, str, dict[str, str]]] = []
    for widget in body["widgets"]:
        for line in widget.get("properties", {}).get("metrics", []):
            for item in line:
                if isinstance(item, dict) and "expression" in item:
                    found.append(_search_parts(str(item["expression"])))
            if line and isinstance(line[0], str):
                plain = [part for part in line if isinstance(part, str)]
                namespace, name, rest = plain[0], plain[1], plain[2:]
                found.append((namespace, name, dict(zip(rest[::2], rest[1::2], strict=True))))
    return found


def _search_parts(expression: str) -> tuple[str, str, dict[str, str]]:
    schema = expression[expression.index("{") + 1 : expression.index("}")].split(",")
    query = expression.split("'", 2)[1]
    terms = dict(re.findall(r'(\w+)="([^"]*)"', query))
    name = terms.pop("MetricName")
    return schema[0], name, {dim: terms.get(dim, "*") for dim in schema[1:]}
