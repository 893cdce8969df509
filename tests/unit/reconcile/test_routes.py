"""The shared proxy: route table from the routes, the canary rule, nginx.conf, its objects, the shards."""

from __future__ import annotations

import inspect
import json
from typing import Any

import kubernetes_validate
import pytest
from pydantic import ValidationError

from gco.endpoints.names import ENDPOINT_NAME_MAX
from gco.reconcile.proxy.proxy_conf import nginx_conf
from gco.reconcile.proxy.proxy_settings import ProxySettings
from gco.reconcile.proxy.render_proxy import (
    PROXY_CONFIG,
    PROXY_CONTAINER,
    PROXY_HPA,
    RELOADER_CONTAINER,
    render_proxy,
)
from gco.reconcile.proxy.route_shards import (
    SHARDS,
    TABLE_JSON,
    merged,
    shard_config_map,
    shard_data,
    shard_key,
    shard_name,
    shard_number,
    shard_of,
    shard_table,
    split,
)
from gco.reconcile.proxy.routes import Route, RouteTable, choose, pick, pinned_version, route_table
from gco.reconcile.render import render
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


def test_a_pinned_request_reaches_the_version_it_names_whatever_the_draw() -> None:
    routes = table()
    for draw in (0.0, 0.5, 0.999):
        assert pick(routes, "/inference/llama/v1", draw, pinned_version("canary")) == (
            "http://llama--canary.gco-inference.svc:8000",
            "/v1",
            "canary",
        )
        assert pick(routes, "/inference/llama/v1", draw, pinned_version("primary"))[2] == "primary"  # type: ignore[index]
    assert pick(routes, "/inference/plain/v1", 0.0, "canary") is None  # no canary: 404, never the primary
    assert pinned_version("Canary") is None and pinned_version(None) is None and pinned_version("x") is None
    assert pick(routes, "/inference/llama/v1", 0.0, pinned_version("other"))[2] == "canary"  # type: ignore[index]


def test_nginx_conf_pins_a_version_by_the_request_header_with_one_more_map() -> None:
    conf = nginx_conf()
    assert "map $http_x_gco_version $gco_version {" in conf
    assert "default $gco_split_version;" in conf and "map $gco_weight $gco_split_version {" in conf
    assert 'if ($gco_backend = "") { return 404; }' in conf  # a pinned canary the route lacks
    # four route maps, the split's, the pin's, the backend's, and one a route shard for its
    # version (`GET /shards`): none per route
    assert conf.count("map ") == 7 + SHARDS


def test_nginx_conf_looks_routes_up_by_name_whatever_their_number() -> None:
    conf = nginx_conf()
    assert "include /etc/gco-proxy/routes/*.primary.map;" in conf
    assert "location ~ ^/inference/(?<gco_name>[a-z0-9-]+)(/|$)" in conf
    assert conf.count("location ~") == 2  # one routed location, one status location: never one per route
    # one split per weight 1-99 (a fixed number), chosen by the route's weight; the version decides
    assert conf.count("split_clients") == 99
    assert 'split_clients "${request_id}" $gco_split_25 { 25% canary; * primary; }' in conf
    assert "25 $gco_split_25;" in conf and "100 canary;" in conf
    assert "canary $gco_canary;" in conf and "proxy_pass http://$gco_backend;" in conf
    assert "listen 8443 ssl;" in conf and "listen 8081;" in conf
    assert conf.count("{") == conf.count("}")


def test_shard_map_files_hold_each_routes_backends_weight_and_digest() -> None:
    routes = table()
    shards = {shard: shard_data(shard, part) for shard, part in split(routes).items()}
    maps = "".join(text for one in shards.values() for key, text in one.items() if key.endswith(".map"))
    assert "llama llama.gco-inference.svc.cluster.local:8000;\n" in maps
    assert "llama llama--canary.gco-inference.svc.cluster.local:8000;\n" in maps
    assert "llama 25;\n" in maps and "plain 0;" not in maps  # only canaries have a weight entry
    assert maps.count("plain ") == 2  # its upstream and its digest
    assert merged(shard_table(s, one) or RouteTable() for s, one in shards.items()) == routes


def test_a_route_lives_in_the_shard_its_name_hashes_to_and_a_foreign_one_is_not_trusted() -> None:
    routes = table()
    [llama] = [r for r in routes.routes if r.endpoint == "llama"]
    home = shard_of("llama")
    assert shard_of("llama") == home and 0 <= home < SHARDS
    assert llama in split(routes)[home].routes
    other = (home + 1) % SHARDS
    foreign = shard_data(other, RouteTable(routes=(llama,)))
    assert shard_table(other, {shard_key(other, TABLE_JSON): foreign[shard_key(other, TABLE_JSON)]}) is None


def test_ten_thousand_routes_of_the_longest_names_fit_kubernetes_limits() -> None:
    """Every shard of a Region of 10,000 endpoints with maximum-length names, each with a canary,
    stays under the 1 MiB a ConfigMap's data may hold (and the 3 MiB of a request)."""
    routes = []
    for index in range(10_000):
        name = f"e{index:05d}".ljust(ENDPOINT_NAME_MAX, "x")
        routes.append(
            Route(
                endpoint=name,
                path=f"/inference/{name}",
                upstream=f"http://{name}.gco-inference.svc:8000",
                canary_upstream=f"http://{name}--canary.gco-inference.svc:8000",
                canary_weight=50,
            )
        )
    sharded = split(RouteTable(routes=tuple(sorted(routes, key=lambda r: r.path))))
    largest = max(
        sum(len(text.encode()) for text in shard_config_map(shard, part)["data"].values())
        for shard, part in sharded.items()
    )
    assert largest < 1024 * 1024 // 2  # half the limit: room for the hash's unevenness


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
    objects = render_proxy(ProxySettings())
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    by_kind = {obj["kind"]: obj for obj in objects}
    deployment = by_kind["Deployment"]
    assert deployment["metadata"] == deployment["metadata"] | {
        "name": "inference-proxy",
        "namespace": "gco-system",
    }
    assert "replicas" not in deployment["spec"]  # the HPA owns the count
    [container, reloader] = deployment["spec"]["template"]["spec"]["containers"]
    assert reloader["name"] == RELOADER_CONTAINER and "kill -HUP" in reloader["command"][-1]
    assert deployment["spec"]["template"]["spec"]["shareProcessNamespace"] is True
    [routes] = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "routes"]
    assert len(routes["projected"]["sources"]) == SHARDS
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
    assert config["data"]["nginx.conf"] == nginx_conf()


def test_no_route_is_rendered_into_the_proxys_objects_so_none_rolls_it() -> None:
    """The proxy's objects are a function of its settings alone: a route change cannot change the
    pod template (nothing rolls); the routes reach the pods through the shards' volume."""
    objects = render_proxy(ProxySettings())
    assert objects == render_proxy(ProxySettings())
    assert list(inspect.signature(render_proxy).parameters) == ["settings"]


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


def test_a_shards_number_is_read_back_from_its_name_and_nothing_else_is_a_shard() -> None:
    assert [shard_number(shard_name(shard)) for shard in (0, 7, SHARDS - 1)] == [0, 7, SHARDS - 1]
    assert shard_number("inference-proxy-conf") is None
    assert shard_number(f"inference-proxy-routes-{SHARDS}") is None  # past the last shard
    assert shard_number("inference-proxy-routes-x1") is None
