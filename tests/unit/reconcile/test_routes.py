"""The shared proxy: route table from the routes, the canary rule, nginx.conf, and its objects."""

from __future__ import annotations

import json
from typing import Any

import kubernetes_validate
import pytest
from pydantic import ValidationError

from gco.reconcile.proxy_settings import ProxySettings
from gco.reconcile.render import render
from gco.reconcile.render_proxy import (
    PROXY_CONFIG,
    PROXY_CONTAINER,
    PROXY_HPA,
    ROUTES_JSON,
    render_proxy,
)
from gco.reconcile.routes import Route, RouteTable, choose, nginx_conf, route_table, routes_json
from tests.unit.reconcile.records import EAST, make_record
from tests.unit.reconcile.test_render import K8S_VERSION

CANARY = {"canary": {"image": "vllm/vllm-openai:v0.6.4", "weight": 25, "replicas": 1}}


def routes_of(*records: Any) -> list[dict[str, Any]]:
    return [obj for record in records for obj in render(record, EAST) if obj["kind"] == "Ingress"]


def table() -> RouteTable:
    plain = make_record(endpoint_name="plain", ingress_path="/inference/plain")
    return route_table(routes_of(make_record(CANARY), plain))


def test_route_table_reads_the_rendered_routes() -> None:
    routes = table().routes
    assert [route.path for route in routes] == ["/inference/llama", "/inference/plain"]
    llama = routes[0]
    assert llama.upstream == "http://llama.gco-inference.svc:8000"
    assert llama.canary_upstream == "http://llama--canary.gco-inference.svc:8000"
    assert llama.canary_weight == 25
    assert routes[1].canary_upstream is None


def test_an_unchanged_route_is_validated_once_and_a_changed_one_again() -> None:
    first, again = table().routes, table().routes
    assert all(a is b for a, b in zip(first, again, strict=True))  # the kept Routes
    moved = make_record(CANARY, ingress_path="/inference/llama")
    moved_routes = routes_of(moved)
    moved_routes[0]["metadata"]["annotations"]["gco.dev/canary-weight"] = "60"
    (changed,) = route_table(moved_routes).routes
    assert (changed.canary_weight, first[0].canary_weight) == (60, 25)


def test_choose_honours_the_canary_weight_and_strips_the_prefix() -> None:
    draws = [i / 1000 for i in range(1000)]
    picks = [choose(table(), "/inference/llama/v1/completions", draw) for draw in draws]
    canary = sum(1 for pick in picks if pick and "canary" in pick[0])
    assert canary == 250  # exactly the weight over a uniform grid of draws
    assert picks[-1] == ("http://llama.gco-inference.svc:8000", "/v1/completions")
    assert choose(table(), "/inference/llama", 0.9) == ("http://llama.gco-inference.svc:8000", "/")
    assert choose(table(), "/inference/llamas/v1", 0.5) is None  # a prefix is matched on a path boundary
    assert choose(table(), "/other", 0.5) is None


def test_nginx_conf_splits_by_weight_and_routes_each_prefix() -> None:
    conf = nginx_conf(table())
    assert "25% llama--canary.gco-inference.svc.cluster.local:8000;" in conf
    assert "* llama.gco-inference.svc.cluster.local:8000;" in conf
    assert "location ~ ^/inference/llama(/|$)" in conf
    assert "rewrite ^/inference/plain/?(.*)$ /$1 break;" in conf
    assert "listen 8443 ssl;" in conf
    # one split per route, and one more deciding the version header of the route with a canary
    assert conf.count("split_clients") == 3
    assert "25% canary;" in conf and "set $gco_version $gco_version_0;" in conf
    assert conf.count("{") == conf.count("}")
    assert "no routes" in nginx_conf(RouteTable())


def test_invalid_or_terminating_routes_are_left_out() -> None:
    [good] = routes_of(make_record())
    bad = json.loads(json.dumps(good))
    bad["metadata"]["annotations"]["gco.dev/upstream"] = "http://evil; } server {"
    terminating = json.loads(json.dumps(good))
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert route_table([bad, terminating]).routes == ()
    with pytest.raises(ValidationError):
        Route(endpoint="x", path="/elsewhere", upstream="http://x.y.svc:80")


def test_proxy_objects_are_valid_and_named_as_the_region_expects() -> None:
    objects = render_proxy(ProxySettings(), table())
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    by_kind = {obj["kind"]: obj for obj in objects}
    deployment = by_kind["Deployment"]
    assert deployment["metadata"] == deployment["metadata"] | {
        "name": "inference-proxy",
        "namespace": "gco-system",
    }
    assert "replicas" not in deployment["spec"]  # the HPA owns the count
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["name"] == PROXY_CONTAINER == "api-tls-proxy"
    assert container["resources"]["requests"]["cpu"] == "250m"
    assert "@sha256:" in container["image"]
    assert by_kind["Service"]["metadata"]["name"] == "inference-proxy"
    hpa = by_kind["HorizontalPodAutoscaler"]
    assert hpa["metadata"]["name"] == PROXY_HPA == "inference-proxy-hpa"
    assert hpa["spec"]["metrics"] == [
        {
            "type": "ContainerResource",
            "containerResource": {
                "name": "cpu",
                "container": "api-tls-proxy",
                "target": {"type": "Utilization", "averageUtilization": 70},
            },
        }
    ]
    config = by_kind["ConfigMap"]
    assert config["metadata"]["name"] == PROXY_CONFIG
    assert json.loads(config["data"][ROUTES_JSON])["routes"][0]["canary_weight"] == 25


def test_a_route_change_rolls_the_proxy_pods() -> None:
    before = render_proxy(ProxySettings(), RouteTable())[1]
    after = render_proxy(ProxySettings(), table())[1]
    key = "gco.dev/routes-digest"
    assert (
        before["spec"]["template"]["metadata"]["annotations"][key]
        != (after["spec"]["template"]["metadata"]["annotations"][key])
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [("image", "nginx:latest"), ("cpu_request", "0.25"), ("cpu_target", 0), ("memory_request", "1G")],
)
def test_proxy_settings_refuse_bad_values_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(ValidationError, match=field):
        ProxySettings.model_validate({field: value})
    with pytest.raises(ValidationError, match="min_replicas"):
        ProxySettings(min_replicas=5, max_replicas=2)


def _routes(*names: str) -> RouteTable:
    return RouteTable(
        routes=tuple(
            Route(
                endpoint=name,
                path=f"/inference/{name}",
                upstream=f"http://{name}.gco-inference.svc:8000",
                canary_upstream=f"http://{name}--canary.gco-inference.svc:8000"
                if name.startswith("c")
                else None,
                canary_weight=30 if name.startswith("c") else 0,
            )
            for name in sorted(names)
        )
    )


def test_routes_json_is_the_sorted_dump_of_the_table_written_from_kept_routes() -> None:
    for routes in (RouteTable(), table(), _routes("a", "c1", "b")):
        assert routes_json(routes) == json.dumps(routes.model_dump(mode="json"), sort_keys=True)
        assert RouteTable.model_validate(json.loads(routes_json(routes))) == routes


def test_nginx_conf_of_kept_blocks_numbers_each_route_by_its_place_in_this_table() -> None:
    """Blocks are kept per route and place: a route inserted before others moves them, and each
    location must still send to its own split's variable."""
    nginx_conf(_routes("b", "d"))  # blocks of b at 0 and d at 1 kept
    conf = nginx_conf(_routes("a", "b", "c1", "d"))
    for index, name in enumerate(["a", "b", "c1", "d"]):
        split = conf.index(f'split_clients "${{request_id}}" $gco_upstream_{index} {{')
        assert f"* {name}.gco-inference.svc.cluster.local:8000;" in conf[split : conf.index("\n    }", split)]
        location = conf.index(f"location ~ ^/inference/{name}(/|$)")
        block = conf[location : conf.index("\n        }", location)]
        assert block.endswith(f"proxy_pass http://$gco_upstream_{index};")
    assert conf.count("split_clients") == 5 and "30% c1--canary.gco-inference.svc.cluster.local:8000;" in conf
