"""Every metric the dashboards draw exists in what its collector emits: Container Insights' GPU metrics
as the add-on configuration the stacks render makes its agent publish them (name, namespace and an
exact dimension set), API Gateway's documented stage metrics (of the front door and, with a global
address, of the global API), and namespace `gco`, whose records the sweep prints (held against the
Lambda's real EMF output in `tests/functional/reconcile/test_sweep_metrics.py`)."""

from __future__ import annotations

from typing import Any

import pytest

from gco.deployment import container_insights as ci
from gco.deployment.dashboards import (
    API_METRICS,
    API_NAMESPACE,
    global_dashboard,
    metric_references,
    regional_dashboard,
)
from gco.reconcile.failures import METRICS_NAMESPACE

CLUSTERS = {"us-east-1": "gco-us-east-1", "us-west-2": "gco-us-west-2"}
FRONT_DOORS = {"us-east-1": "a", "us-west-2": "b"}
GLOBAL_APIS = {"us-east-1": "global-a", "us-west-2": "global-b"}
BODIES = {
    "regional": regional_dashboard(
        region="us-east-1",
        api_name="api",
        stage="v1",
        access_log_group="/logs",
        cluster_name=CLUSTERS["us-east-1"],
        global_api_name="global-api",
    ),
    "global": global_dashboard(
        api_names=FRONT_DOORS, cluster_names=CLUSTERS, stage="v1", global_api_names=GLOBAL_APIS
    ),
}


def region_of_line(body: dict[str, Any]) -> list[tuple[str, tuple[str, str, dict[str, str]]]]:
    """(the widget's Region, reference) of every metric line of a body."""
    out = []
    for widget in body["widgets"]:
        for reference in metric_references({"widgets": [widget]}):
            out.append((str(widget["properties"]["region"]), reference))
    return out


@pytest.mark.parametrize("name", sorted(BODIES))
def test_each_drawn_metric_belongs_to_a_collector_the_deployment_runs(name: str) -> None:
    namespaces = {ns for ns, _, _ in metric_references(BODIES[name])}
    assert namespaces == {API_NAMESPACE, METRICS_NAMESPACE, ci.NAMESPACE}
    assert {m for ns, m, _ in metric_references(BODIES[name]) if ns == API_NAMESPACE} <= set(API_METRICS)


@pytest.mark.parametrize("name", sorted(BODIES))
def test_gpu_widgets_draw_what_the_rendered_add_on_configuration_publishes(name: str) -> None:
    published = ci.published_gpu_metrics(ci.addon_configuration())
    drawn = [(region, ref) for region, ref in region_of_line(BODIES[name]) if ref[0] == ci.NAMESPACE]
    assert {ref[1] for _, ref in drawn} == {ci.POD_GPU_UTILISATION, ci.NODE_GPU_UTILISATION}
    assert {region for region, _ in drawn} == ({"us-east-1"} if name == "regional" else set(CLUSTERS))
    for region, (_, metric, dims) in drawn:
        assert metric in published, metric
        assert tuple(sorted(dims)) in {tuple(sorted(s)) for s in published[metric]}, (metric, dims)
        # Each Region's widget reads its own cluster, and a SEARCH leaves only the endpoint's Service open.
        assert dims[ci.CLUSTER_DIMENSION] == CLUSTERS[region]
        assert {k for k, v in dims.items() if v == "*"} <= {"Namespace", "Service"}


def api_lines(body: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    """(Region of the widget, ApiName) -> the API Gateway metrics drawn of it there."""
    drawn: dict[tuple[str, str], set[str]] = {}
    for region, (namespace, metric, dims) in region_of_line(body):
        if namespace == API_NAMESPACE:
            assert dims["Stage"] == "v1" and set(dims) == {"ApiName", "Stage"}
            drawn.setdefault((region, dims["ApiName"]), set()).add(metric)
    return drawn


def test_each_way_in_is_drawn_in_its_region_with_every_api_metric() -> None:
    every = set(API_METRICS)
    assert api_lines(BODIES["regional"]) == {("us-east-1", "api"): every, ("us-east-1", "global-api"): every}
    assert api_lines(BODIES["global"]) == {
        **{(region, name): every for region, name in FRONT_DOORS.items()},
        **{(region, name): every for region, name in GLOBAL_APIS.items()},
    }
    titles = [w["properties"]["title"] for w in BODIES["global"]["widgets"]]
    assert "us-west-2: global address requests and errors" in titles


def test_without_a_global_address_only_the_front_door_is_drawn() -> None:
    regional = regional_dashboard(
        region="us-east-1", api_name="api", stage="v1", access_log_group="/logs", cluster_name="c"
    )
    assert set(api_lines(regional)) == {("us-east-1", "api")}
    regions = global_dashboard(api_names=FRONT_DOORS, cluster_names=CLUSTERS, stage="v1")
    assert set(api_lines(regions)) == set(FRONT_DOORS.items())


def test_the_agent_publishes_gpu_metrics_only_with_enhanced_and_accelerated_compute_on() -> None:
    def config(**kubernetes: bool) -> dict[str, Any]:
        return {"agent": {"config": {"logs": {"metrics_collected": {"kubernetes": kubernetes}}}}}

    assert ci.published_gpu_metrics(config(enhanced_container_insights=True)) == ci.GPU_DECLARATIONS
    assert ci.published_gpu_metrics(config(enhanced_container_insights=False)) == {}
    assert (
        ci.published_gpu_metrics(config(enhanced_container_insights=True, accelerated_compute_metrics=False))
        == {}
    )
    assert ci.published_gpu_metrics({}) == {}
    rendered = ci.addon_configuration()
    assert rendered["containerLogs"] == {"enabled": False}
    assert set(ci.ENDPOINT_GPU_DIMENSIONS) in [set(s) for s in ci.GPU_DECLARATIONS[ci.POD_GPU_UTILISATION]]
