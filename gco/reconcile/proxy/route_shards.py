"""Where the proxy reads routes from: `SHARDS` ConfigMaps in `gco-system`, each holding the routes of
the endpoints whose names hash to it, rendered as pure functions.

One object for every route of a Region (the proxy's former `routes.json`) reaches Kubernetes' 1 MiB
limit on a ConfigMap's data at about 2,000 endpoints, and every change rewrote all of it. Sharded,
a Region of 10,000 endpoints with names of the maximum length puts about 1/64 of the table in each
ConfigMap (under 150 KiB), and a route change rewrites the one shard its endpoint hashes to.

A shard's data, the files of the proxy's projected volume (`ROUTES_DIR`):

- `NN.primary.map`, `NN.canary.map`, `NN.weight.map`, `NN.digest.map`: `map` entries
  (`<name> <value>;`) that the proxy's nginx.conf includes into `map` blocks keyed by the endpoint
  name: its upstream (`host:port`), its canary's, the canary weight (0-100), and the route's digest
  (`route_digest`, which the proxy's status port answers so the reconciler can tell that a proxy
  serves the route as rendered). Only routes with a canary appear in the canary and weight maps;
- `NN.version.map`: one `map` entry, `NN <version>;`, the shard's version (`shard_version`: a digest
  of every route it holds, by name and route digest). The proxy's status port answers every shard's
  version in one reply (`GET /shards`), so the reconciler asks each proxy pod once per batch whether
  it loaded the shards it wrote, instead of once per endpoint;
- `NN.json`: the same routes as a route table (`{"routes": [...]}`, sorted by path), which the
  route keeper merges changes into and the local in-process router reads.

Each shard carries the digest of its data (`HASH_ANNOTATION`), so a rebuild writes only the shards
whose routes changed.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gco.reconcile.objects import (
    COMPONENT_LABEL,
    CONFIG_MAP,
    HASH_ANNOTATION,
    MANAGED_BY,
    MANAGER,
    SYSTEM_NAMESPACE,
    content_hash,
)
from gco.reconcile.proxy.routes import ROUTE_CACHE_SIZE, Route, RouteTable, backend, table_from_json

SHARDS = 64
SHARD_PREFIX = "inference-proxy-routes-"
SHARD_COMPONENT = "inference-proxy-routes"  # the shards' component label (one list finds them all)
PRIMARY_MAP, CANARY_MAP, WEIGHT_MAP = ".primary.map", ".canary.map", ".weight.map"
DIGEST_MAP, VERSION_MAP, TABLE_JSON = ".digest.map", ".version.map", ".json"
MAP_SUFFIXES = (PRIMARY_MAP, CANARY_MAP, WEIGHT_MAP, DIGEST_MAP, VERSION_MAP)


@dataclass(frozen=True)
class ShardVersion:
    """A shard at one version (`shard_version`): what a proxy pod that loaded it routes is known."""

    shard: int
    version: str


def shard_of(endpoint: str) -> int:
    """The shard an endpoint's route lives in: a stable hash of its name (the same in every process)."""
    return int.from_bytes(hashlib.sha256(endpoint.encode()).digest()[:4], "big") % SHARDS


def shard_name(shard: int) -> str:
    return f"{SHARD_PREFIX}{shard:02d}"


def shard_number(name: str) -> int | None:
    """The shard a ConfigMap's name says it holds (`shard_name`'s inverse), or None for any other name."""
    suffix = name.removeprefix(SHARD_PREFIX)
    number = int(suffix) if name.startswith(SHARD_PREFIX) and suffix.isdigit() else None
    return number if number is not None and number < SHARDS else None


def shard_key(shard: int, suffix: str) -> str:
    """A shard's file name (a ConfigMap key): unique across the shards, which share one volume."""
    return f"{shard:02d}{suffix}"


def shard_labels() -> dict[str, str]:
    return {MANAGED_BY: MANAGER, COMPONENT_LABEL: SHARD_COMPONENT}


def split(table: RouteTable) -> dict[int, RouteTable]:
    """Every shard's routes (a shard with none has an empty table): the whole table, sharded."""
    found: dict[int, list[Route]] = {shard: [] for shard in range(SHARDS)}
    for route in table.routes:
        found[shard_of(route.endpoint)].append(route)
    return {shard: RouteTable(routes=tuple(routes)) for shard, routes in found.items()}


def shard_data(shard: int, table: RouteTable) -> dict[str, str]:
    """The shard's ConfigMap data: the three map files and the table (module docstring)."""
    canaries = [route for route in table.routes if route.canary_upstream is not None]
    return {
        shard_key(shard, PRIMARY_MAP): "".join(_primary_line(route) for route in table.routes),
        shard_key(shard, CANARY_MAP): "".join(_canary_line(route) for route in canaries),
        shard_key(shard, WEIGHT_MAP): "".join(_weight_line(route) for route in canaries),
        shard_key(shard, DIGEST_MAP): "".join(_digest_line(route) for route in table.routes),
        shard_key(shard, VERSION_MAP): f"{shard:02d} {shard_version(table)};\n",
        shard_key(shard, TABLE_JSON): '{"routes": [' + ", ".join(_route_json(r) for r in table.routes) + "]}",
    }


def shard_version(table: RouteTable) -> str:
    """A digest of a shard's routes, each by its name and `route_digest`: a proxy that loaded a shard
    of this version routes every endpoint of it as `table` does (the table, not the other files,
    is what the digest lines are made from)."""
    return hashlib.sha256("".join(_digest_line(route) for route in table.routes).encode()).hexdigest()[:16]


def versions_answer(versions: Mapping[int, str]) -> str:
    """The proxy's `GET /shards` answer for these loaded versions, as its nginx.conf writes it
    (`proxy_conf.py`): a line a shard, its number, a space and its version (empty when none)."""
    return "".join(f"{shard:02d} {versions.get(shard, '')}\n" for shard in range(SHARDS))


def parse_versions(text: str) -> dict[int, str]:
    """Each shard's version from the proxy's `GET /shards` answer (`NN <version>` lines; a shard
    the proxy has no version of has none after its number, and is left out)."""
    versions: dict[int, str] = {}
    for line in text.splitlines():
        number, _, version = line.strip().partition(" ")
        if number.isdigit() and int(number) < SHARDS and version.strip():
            versions[int(number)] = version.strip()
    return versions


def version_of(shard: int, data: Mapping[str, Any] | None) -> str | None:
    """The version a stored shard's data declares (its `NN.version.map` entry, `NN <version>;`), or
    None without one (a shard written before versions were, or not this shard's entry)."""
    text = (data or {}).get(shard_key(shard, VERSION_MAP))
    number, _, version = (
        text.strip().removesuffix(";").partition(" ") if isinstance(text, str) else ("", "", "")
    )
    return version.strip() or None if number == f"{shard:02d}" else None


def shard_config_map(shard: int, table: RouteTable) -> dict[str, Any]:
    """The shard's ConfigMap, sealed with its data's digest."""
    data = shard_data(shard, table)
    return {
        "apiVersion": CONFIG_MAP.api_version,
        "kind": CONFIG_MAP.kind,
        "metadata": {
            "name": shard_name(shard),
            "namespace": SYSTEM_NAMESPACE,
            "labels": shard_labels(),
            "annotations": {HASH_ANNOTATION: content_hash(data)},
        },
        "data": data,
    }


def shard_table(shard: int, data: Mapping[str, Any] | None) -> RouteTable | None:
    """The route table a stored shard's data holds, or None when it cannot be trusted (missing, not a
    table, or holding a route that hashes to another shard)."""
    table = table_from_json((data or {}).get(shard_key(shard, TABLE_JSON)))
    if table is None or any(shard_of(route.endpoint) != shard for route in table.routes):
        return None
    return table


@functools.lru_cache(maxsize=ROUTE_CACHE_SIZE)
def _primary_line(route: Route) -> str:
    # Names and hosts are DNS labels (validated by Route): nothing in them needs quoting.
    return f"{route.endpoint} {backend(route.upstream)};\n"


@functools.lru_cache(maxsize=ROUTE_CACHE_SIZE)
def _canary_line(route: Route) -> str:
    assert route.canary_upstream is not None
    return f"{route.endpoint} {backend(route.canary_upstream)};\n"


def _weight_line(route: Route) -> str:
    return f"{route.endpoint} {route.canary_weight};\n"


@functools.lru_cache(maxsize=ROUTE_CACHE_SIZE)
def route_digest(route: Route) -> str:
    """A short digest of everything a route routes by: equal digests, equal routing."""
    return hashlib.sha256(_route_json(route).encode()).hexdigest()[:16]


def _digest_line(route: Route) -> str:
    return f"{route.endpoint} {route_digest(route)};\n"


@functools.lru_cache(maxsize=ROUTE_CACHE_SIZE)
def _route_json(route: Route) -> str:
    return json.dumps(route.model_dump(mode="json"), sort_keys=True)


def merged(tables: Iterable[RouteTable]) -> RouteTable:
    """One table of several shards' routes, sorted by path."""
    routes = {route.path: route for table in tables for route in table.routes}
    return RouteTable(routes=tuple(routes[path] for path in sorted(routes)))
