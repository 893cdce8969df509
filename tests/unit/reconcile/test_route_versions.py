"""A route shard's version: what it is made of, how a shard carries it, and the proxy's `GET /shards`
answer that reports it (`route_shards.py`, `proxy_conf.py`)."""

from __future__ import annotations

from gco.reconcile.proxy.proxy_probe import served_by_version
from gco.reconcile.proxy.route_shards import (
    SHARDS,
    VERSION_MAP,
    ShardVersion,
    parse_versions,
    shard_data,
    shard_key,
    shard_of,
    shard_version,
    version_of,
    versions_answer,
)
from gco.reconcile.proxy.routes import Route, RouteTable

LLAMA = Route(endpoint="llama", path="/inference/llama", upstream="http://llama.gco-inference.svc:8000")


def route(name: str, upstream: str | None = None, **canary: object) -> Route:
    return Route(
        endpoint=name,
        path=f"/inference/{name}",
        upstream=upstream or f"http://{name}.gco-inference.svc:8000",
        **canary,
    )


def test_a_shard_s_data_declares_its_version_and_the_proxy_s_answer_parses_back() -> None:
    shard = shard_of(LLAMA.endpoint)
    table = RouteTable(routes=(LLAMA,))
    data = shard_data(shard, table)
    assert data[shard_key(shard, VERSION_MAP)] == f"{shard:02d} {shard_version(table)};\n"
    assert version_of(shard, data) == shard_version(table)
    answer = versions_answer({shard: shard_version(table)})
    assert answer.count("\n") == SHARDS and f"{shard:02d} {shard_version(table)}\n" in answer
    assert parse_versions(answer) == {shard: shard_version(table)}


def test_the_version_follows_every_field_a_route_routes_by_and_nothing_else() -> None:
    base = RouteTable(routes=(LLAMA,))
    same = RouteTable(routes=(route("llama"),))
    assert shard_version(base) == shard_version(same)
    changed = [
        RouteTable(routes=(route("llama", "http://llama-2.gco-inference.svc:8000"),)),
        RouteTable(
            routes=(route("llama", canary_upstream="http://llama-c.gco-inference.svc:8000", canary_weight=5),)
        ),
        RouteTable(routes=(LLAMA, route("mistral"))),
        RouteTable(),
    ]
    assert len({shard_version(table) for table in [base, *changed]}) == 1 + len(changed)


def test_a_shard_without_a_version_or_with_another_shard_s_has_none() -> None:
    shard = shard_of(LLAMA.endpoint)
    other = (shard + 1) % SHARDS
    assert version_of(shard, None) is None
    assert version_of(shard, {}) is None
    assert version_of(shard, {shard_key(shard, VERSION_MAP): f"{other:02d} abc;\n"}) is None
    assert version_of(shard, {shard_key(shard, VERSION_MAP): f"{shard:02d} ;\n"}) is None
    assert version_of(shard, {shard_key(shard, VERSION_MAP): 7}) is None


def test_an_answer_s_empty_and_foreign_lines_are_left_out() -> None:
    text = "00 abc\n01 \n02\nxx def\n64 ghi\n03  jkl \n"
    assert parse_versions(text) == {0: "abc", 3: "jkl"}
    assert parse_versions("") == {}


def test_a_pod_serves_a_route_by_version_only_when_it_loaded_that_shard_at_that_version() -> None:
    known = {"llama": ShardVersion(7, "v1")}
    assert served_by_version("llama", known, {7: "v1"})
    assert not served_by_version("llama", known, {7: "v2"})
    assert not served_by_version("llama", known, {8: "v1"})
    assert not served_by_version("mistral", known, {7: "v1"})
    assert not served_by_version("llama", None, {7: "v1"})
