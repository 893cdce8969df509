"""The shared proxy's routing, as pure functions: route objects -> routes -> where a request goes.

Each endpoint's route is an Ingress `<name>--route` in `gco-system` (rendered by `render.py`) whose
annotations name its upstream Service and, with a canary, the canary Service and weight. The route
keeper (`route_keeper.py`) reads those Ingresses into `Route`s and stores them, sharded, where the
proxy reads them (`route_shards.py`); the proxy's configuration (`proxy_conf.py`) looks a request's
endpoint up in them by name.

Routing rule, the same in every consumer:

- `/inference/<name>` and everything under it go to that endpoint; the prefix is stripped, so
  `/inference/llama/v1/completions` reaches the engine as `/v1/completions`. The endpoint is found
  by its name (a hash lookup: nginx `map`, a dict here), so routing costs the same with 10 routes
  as with 10,000;
- with a canary of weight w, a request goes to the canary with probability w/100, decided per
  request (nginx `split_clients` over `$request_id`; `choose` takes the uniform draw as an argument
  so a local program, or a test, decides the same way);
- any other path is 404;
- a request whose path as sent could be routed other than it reads is 400, before routing: a dot
  segment or encoded separator anywhere (`gco.endpoints.paths.NGINX_REFUSED`), or a route prefix
  that is not written exactly (`paths.NGINX_ROUTE_CHECK`); `paths.escape_reason` is the same rule
  for a program;
- every answer through a route says which version answered in `X-Gco-Version` (`primary` or
  `canary`), from the same decision that picked the upstream;
- a request carrying `X-Gco-Version: primary` or `canary` is pinned to that version, not split (a
  rollout's analysis traffic reaches both versions by name); pinned to a canary the route does not
  have, it is 404. Any other value of the header is ignored.

Upstream hosts are validated (`<service>.<namespace>.svc`, a port) so that a route object edited by
hand cannot inject configuration.
"""

# No `from __future__ import annotations` in the modules of pydantic models: pydantic would compile and
# evaluate every string annotation when the models are defined, at each Lambda cold start.

import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gco.endpoints.paths import INGRESS_PREFIX
from gco.reconcile.objects import (
    CANARY_UPSTREAM_ANNOTATION,
    CANARY_WEIGHT_ANNOTATION,
    ENDPOINT_LABEL,
    INGRESS,
    SYSTEM_NAMESPACE,
    UPSTREAM_ANNOTATION,
    annotations_of,
    labels_of,
)

UPSTREAM = re.compile(
    r"^http://(?P<host>[a-z0-9]([a-z0-9-]*[a-z0-9])?\.[a-z0-9]([a-z0-9-]*[a-z0-9])?\.svc):(?P<port>\d{1,5})$"
)
ROUTE_PATH = re.compile(rf"^{re.escape(INGRESS_PREFIX)}[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
CLUSTER_DOMAIN = "cluster.local"
# The proxy's listening port (TLS), its health path, and where its files are mounted.
PROXY_PORT = 8443
HEALTH_PATH = "/healthz"
CONFIG_DIR = "/etc/gco-proxy/conf"  # nginx.conf (the proxy's ConfigMap)
ROUTES_DIR = "/etc/gco-proxy/routes"  # the route shards' files (their ConfigMaps, one projected volume)
# The proxy's status port, inside the pod only (no Service or target group names it): `GET
# /routes/<name>` answers what this pod's nginx routes the endpoint to now, `GET /shards` the
# version of each route shard it loaded (`proxy_conf.py`).
STATUS_PORT = 8081
STATUS_ROUTE_PATH = "/routes/"
STATUS_SHARDS_PATH = "/shards"
TLS_DIR = "/tls"
RESOLVER = f"kube-dns.kube-system.svc.{CLUSTER_DOMAIN}"
VERSION_HEADER = "X-Gco-Version"  # which version answered: PRIMARY or CANARY
PRIMARY, CANARY = "primary", "canary"
ROUTE_CACHE_SIZE = 16384  # validated routes kept (see `_route`): above a Region's 10,000 endpoints


class Route(BaseModel):
    """One endpoint's route: its path prefix, upstream, and optional canary with its weight (0-100)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: str
    path: str
    upstream: str
    canary_upstream: str | None = None
    canary_weight: int = Field(default=0, ge=0, le=100)

    @field_validator("upstream", "canary_upstream")
    @classmethod
    def _upstream(cls, value: str | None) -> str | None:
        if value is not None and not UPSTREAM.match(value):
            raise ValueError(f"{value!r} is not http://<service>.<namespace>.svc:<port>")
        return value

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not ROUTE_PATH.match(value):
            raise ValueError(f"{value!r} is not {INGRESS_PREFIX}<name>")
        return value


class RouteTable(BaseModel):
    """Routes sorted by path (so equal tables render equal configurations), looked up by path."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    routes: tuple[Route, ...] = ()

    @functools.cached_property
    def by_path(self) -> dict[str, Route]:
        """Each route under its path prefix (built once per table: the table is immutable)."""
        return {route.path: route for route in self.routes}


def _route_of(obj: Mapping[str, Any]) -> Route | None:
    annotations = annotations_of(obj)
    upstream = annotations.get(UPSTREAM_ANNOTATION)
    try:
        path = obj["spec"]["rules"][0]["http"]["paths"][0]["path"]
    except (KeyError, IndexError, TypeError):
        return None
    if not upstream:
        return None
    canary = annotations.get(CANARY_UPSTREAM_ANNOTATION)
    weight = annotations.get(CANARY_WEIGHT_ANNOTATION, "0")
    return _route(
        labels_of(obj).get(ENDPOINT_LABEL, ""),
        str(path),
        str(upstream),
        None if canary is None else str(canary),
        int(weight) if canary and str(weight).isdigit() else 0,
    )


@functools.lru_cache(maxsize=ROUTE_CACHE_SIZE)
def _route(endpoint: str, path: str, upstream: str, canary: str | None, weight: int) -> Route | None:
    """The validated Route of these values, or None if they are invalid.

    Kept: a route refresh reads every route of the Region, nearly all of them unchanged since the
    last refresh, and a Route is immutable (frozen), so an unchanged route is validated once.
    """
    try:
        return Route(
            endpoint=endpoint, path=path, upstream=upstream, canary_upstream=canary, canary_weight=weight
        )
    except ValueError:
        return None  # an invalid route (edited by hand) is left out, never rendered into the config


def route_of(obj: Mapping[str, Any]) -> Route | None:
    """The route an object serves: an Ingress in gco-system, not terminating, naming a valid upstream.

    None for anything else (another kind or namespace, a terminating or invalid route), which the
    route table leaves out.
    """
    meta = obj.get("metadata") or {}
    if obj.get("kind") != INGRESS.kind or meta.get("namespace") != SYSTEM_NAMESPACE:
        return None
    if meta.get("deletionTimestamp"):
        return None
    return _route_of(obj)


def route_table(objects: Iterable[Mapping[str, Any]]) -> RouteTable:
    """The routes among `objects`: Ingresses in gco-system that name an upstream; others are ignored.

    Two routes of one path: the later object's is kept (objects come sorted by name from a list).
    """
    routes: dict[str, Route] = {}
    for obj in objects:
        route = route_of(obj)
        if route is not None:
            routes[route.path] = route
    return RouteTable(routes=tuple(routes[path] for path in sorted(routes)))


def table_from_json(text: object) -> RouteTable | None:
    """The route table a route shard's `NN.json` holds (`route_shards.py`), or None if it is not one.

    The inverse of `RouteTable.model_dump_json`, through the kept validated Routes (`_route`), so
    reading back a table of unchanged routes validates none of them again. Anything else (not a
    string, not JSON, a field missing, extra or of the wrong type, an invalid route) is None: the
    caller then rebuilds the table from the route objects instead of trusting it.
    """
    if not isinstance(text, str):
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    entries = document.get("routes") if isinstance(document, dict) and set(document) == {"routes"} else None
    if not isinstance(entries, list):
        return None
    routes: dict[str, Route] = {}
    for entry in entries:
        route = _route_entry(entry)
        if route is None or route.path in routes:
            return None
        routes[route.path] = route
    return RouteTable(routes=tuple(routes[path] for path in sorted(routes)))


def _route_entry(entry: object) -> Route | None:
    """One table entry as its Route, or None if it is not exactly a Route's fields."""
    if not isinstance(entry, dict) or set(entry) != set(Route.model_fields):
        return None
    endpoint, path, upstream = entry["endpoint"], entry["path"], entry["upstream"]
    canary, weight = entry["canary_upstream"], entry["canary_weight"]
    if not (isinstance(endpoint, str) and isinstance(path, str) and isinstance(upstream, str)):
        return None
    if not (canary is None or isinstance(canary, str)) or type(weight) is not int:
        return None
    return _route(endpoint, path, upstream, canary, weight)


def pinned_version(header: str | None) -> str | None:
    """The version a request's `X-Gco-Version` header pins (PRIMARY or CANARY), or None (split)."""
    return header if header in (PRIMARY, CANARY) else None


def choose(table: RouteTable, path: str, draw: float) -> tuple[str, str] | None:
    """(upstream base URL, path to request there) for `path`, or None (404).

    Parameters:
        draw: a uniform number in [0, 1); the canary is chosen when `draw * 100 < weight`.
    """
    picked = pick(table, path, draw)
    return None if picked is None else (picked[0], picked[1])


def pick(table: RouteTable, path: str, draw: float, pinned: str | None = None) -> tuple[str, str, str] | None:
    """`choose` with the version chosen: (upstream base URL, path there, PRIMARY or CANARY).

    The route is found by the path's first segment under the prefix, as nginx's `map` finds it.

    Parameters:
        pinned: the version the request pins (`pinned_version`); the draw is then not used, and a
            canary pinned where the route has none is None (404).
    """
    if not path.startswith(INGRESS_PREFIX):
        return None
    name, slash, rest = path[len(INGRESS_PREFIX) :].partition("/")
    route = table.by_path.get(INGRESS_PREFIX + name)
    if route is None:
        return None
    rest = slash + rest or "/"
    if pinned == CANARY:
        return None if route.canary_upstream is None else (route.canary_upstream, rest, CANARY)
    if pinned == PRIMARY:
        return route.upstream, rest, PRIMARY
    if route.canary_upstream is not None and draw * 100 < route.canary_weight:
        return route.canary_upstream, rest, CANARY
    return route.upstream, rest, PRIMARY


def backend(upstream: str) -> str:
    """The `host:port` nginx proxies to for a validated upstream: its Service's cluster DNS name."""
    match = UPSTREAM.match(upstream)
    assert match is not None  # validated by Route
    return f"{match['host']}.{CLUSTER_DOMAIN}:{match['port']}"
