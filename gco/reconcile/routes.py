"""The shared proxy's routing, as pure functions: route objects -> a route table -> nginx configuration.

Each endpoint's route is an Ingress `route-<name>` in `gco-system` (rendered by `render.py`) whose
annotations name its upstream Service and, with a canary, the canary Service and weight. The
reconciler reads those Ingresses, builds a `RouteTable` (`route_table`), and renders from it the
proxy's configuration (`nginx_conf`), which the `api-tls-proxy` container serves.

Routing rule, the same in every consumer:

- `/inference/<name>` and everything under it go to that endpoint; the prefix is stripped, so
  `/inference/llama/v1/completions` reaches the engine as `/v1/completions`;
- with a canary of weight w, a request goes to the canary with probability w/100, decided per
  request (nginx `split_clients` over `$request_id`; `choose` takes the uniform draw as an argument
  so a local program, or a test, decides the same way);
- any other path is 404;
- a request whose path as sent could be routed other than it reads is 400, before routing: a dot
  segment or encoded separator anywhere (`gco.endpoints.paths.NGINX_REFUSED`), or a route prefix
  that is not written exactly (`paths.nginx_prefix_check`); `paths.escape_reason` is the same
  rule for a program;
- every answer through a route says which version answered in `X-Gco-Version` (`primary` or
  `canary`): with a canary, a second `split_clients` over the same key and weight decides the
  same way as the one that picks the upstream (nginx hashes the key and compares it with the
  same percentages).

`choose` is the rule for a program that routes in-process (the local stack); `nginx_conf` for the
deployed proxy. nginx streams answers (`proxy_buffering off`: each piece of an engine's server-sent
events goes to the caller as it is read) and waits `GENERATION_TIMEOUT_S` between reads and
writes, the front door's limit on a generation. Upstream hosts are validated
(`<service>.<namespace>.svc`, a port) so that a route object edited by hand cannot inject
configuration.
"""

# No `from __future__ import annotations` in the modules of pydantic models: pydantic would compile and
# evaluate every string annotation when the models are defined, at each Lambda cold start.

import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gco.endpoints.paths import NGINX_REFUSED, nginx_prefix_check
from gco.endpoints.record import INGRESS_PREFIX
from gco.front_door import GENERATION_TIMEOUT_S
from gco.reconcile.objects import ENDPOINT_LABEL, INGRESS, SYSTEM_NAMESPACE, annotations_of, labels_of
from gco.reconcile.render import CANARY_UPSTREAM_ANNOTATION, CANARY_WEIGHT_ANNOTATION, UPSTREAM_ANNOTATION

UPSTREAM = re.compile(
    r"^http://(?P<host>[a-z0-9]([a-z0-9-]*[a-z0-9])?\.[a-z0-9]([a-z0-9-]*[a-z0-9])?\.svc):(?P<port>\d{1,5})$"
)
ROUTE_PATH = re.compile(rf"^{re.escape(INGRESS_PREFIX)}[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
CLUSTER_DOMAIN = "cluster.local"
# The proxy's listening port (TLS), its health path, and where its files are mounted.
PROXY_PORT = 8443
HEALTH_PATH = "/healthz"
CONFIG_DIR = "/etc/gco-proxy"
TLS_DIR = "/tls"
RESOLVER = f"kube-dns.kube-system.svc.{CLUSTER_DOMAIN}"
VERSION_HEADER = "X-Gco-Version"  # which version answered: PRIMARY or CANARY
PRIMARY, CANARY = "primary", "canary"
ROUTE_CACHE_SIZE = 8192  # validated routes kept (see `_route`): a few times the design's 1,000 endpoints


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
    """Every route of a Region, sorted by path (so equal tables render equal configurations)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    routes: tuple[Route, ...] = ()


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
    """The route table a proxy ConfigMap's `routes.json` holds, or None if it is not one.

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
    """One `routes.json` entry as its Route, or None if it is not exactly a Route's fields."""
    if not isinstance(entry, dict) or set(entry) != set(Route.model_fields):
        return None
    endpoint, path, upstream = entry["endpoint"], entry["path"], entry["upstream"]
    canary, weight = entry["canary_upstream"], entry["canary_weight"]
    if not (isinstance(endpoint, str) and isinstance(path, str) and isinstance(upstream, str)):
        return None
    if not (canary is None or isinstance(canary, str)) or type(weight) is not int:
        return None
    return _route(endpoint, path, upstream, canary, weight)


def choose(table: RouteTable, path: str, draw: float) -> tuple[str, str] | None:
    """(upstream base URL, path to request there) for `path`, or None (404).

    Parameters:
        draw: a uniform number in [0, 1); the canary is chosen when `draw * 100 < weight`.
    """
    picked = pick(table, path, draw)
    return None if picked is None else (picked[0], picked[1])


def pick(table: RouteTable, path: str, draw: float) -> tuple[str, str, str] | None:
    """`choose` with the version chosen: (upstream base URL, path there, PRIMARY or CANARY)."""
    for route in table.routes:
        if path == route.path or path.startswith(route.path + "/"):
            rest = path[len(route.path) :] or "/"
            if route.canary_upstream is not None and draw * 100 < route.canary_weight:
                return route.canary_upstream, rest, CANARY
            return route.upstream, rest, PRIMARY
    return None


def _backend(upstream: str) -> str:
    match = UPSTREAM.match(upstream)
    assert match is not None  # validated by Route
    return f"{match['host']}.{CLUSTER_DOMAIN}:{match['port']}"


def nginx_conf(table: RouteTable) -> str:
    """The proxy's whole nginx.conf: TLS on PROXY_PORT, one location per route, canary splits."""
    blocks = [_route_blocks(route, index) for index, route in enumerate(table.routes)]
    return _TEMPLATE.format(
        resolver=RESOLVER,
        splits="\n    ".join(split for split, _ in blocks) or "# no routes",
        port=PROXY_PORT,
        tls=TLS_DIR,
        health=HEALTH_PATH,
        timeout=GENERATION_TIMEOUT_S,
        refused="\n".join(
            f'        if ($request_uri ~* "{rule}") {{ return 400; }}' for rule in NGINX_REFUSED
        ),
        version_header=VERSION_HEADER,
        primary=PRIMARY,
        locations="\n".join(location for _, location in blocks) or "        # no routes",
    )


@functools.lru_cache(maxsize=2 * ROUTE_CACHE_SIZE)
def _route_blocks(route: Route, index: int) -> tuple[str, str]:
    """One route's `split_clients` block and `location` block, as the route at `index` of its table.

    Kept, like the validated routes: a refresh renders the whole table, nearly all of it unchanged
    (and at unchanged places, as new endpoints' paths mostly sort last) since the last refresh.
    """
    variable = f"$gco_upstream_{index}"
    canary = route.canary_upstream is not None and route.canary_weight > 0
    lines = [f'split_clients "${{request_id}}" {variable} {{']
    if canary:
        assert route.canary_upstream is not None
        lines.append(f"        {route.canary_weight}% {_backend(route.canary_upstream)};")
    lines.append(f"        * {_backend(route.upstream)};")
    lines.append("    }")
    version = ""
    if canary:  # the same key and percentages as the upstream's split: the same decision
        lines.append(f'    split_clients "${{request_id}}" $gco_version_{index} {{')
        lines.append(f"        {route.canary_weight}% {CANARY};")
        lines.append(f"        * {PRIMARY};")
        lines.append("    }")
        version = f"            set $gco_version $gco_version_{index};\n"
    prefix = re.escape(route.path)
    location = (
        f"        # {route.endpoint}\n"
        f"        location ~ ^{prefix}(/|$) {{\n"
        f'            if ($request_uri !~ "{nginx_prefix_check(route.path)}") {{ return 400; }}\n'
        f"{version}"
        f"            rewrite ^{prefix}/?(.*)$ /$1 break;\n"
        f"            proxy_pass http://{variable};\n"
        "        }"
    )
    return "\n".join(lines), location


def routes_json(table: RouteTable) -> str:
    """The table as the ConfigMap's `routes.json`: `json.dumps(table.model_dump(mode="json"),
    sort_keys=True)`, written from each route's kept JSON rather than dumping every route again."""
    return '{"routes": [' + ", ".join(_route_json(route) for route in table.routes) + "]}"


@functools.lru_cache(maxsize=ROUTE_CACHE_SIZE)
def _route_json(route: Route) -> str:
    return json.dumps(route.model_dump(mode="json"), sort_keys=True)


_TEMPLATE = """\
# Rendered by the gco reconciler from the routes in gco-system; do not edit.
worker_processes auto;
pid /tmp/nginx.pid;
error_log /dev/stderr warn;
events {{ worker_connections 4096; }}
http {{
    access_log /dev/stdout;
    client_body_temp_path /tmp/client_body;
    proxy_temp_path /tmp/proxy;
    fastcgi_temp_path /tmp/fastcgi;
    uwsgi_temp_path /tmp/uwsgi;
    scgi_temp_path /tmp/scgi;
    resolver {resolver} valid=30s ipv6=off;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_set_header Host $proxy_host;
    proxy_buffering off;
    proxy_read_timeout {timeout}s;
    proxy_send_timeout {timeout}s;
    send_timeout {timeout}s;
    client_max_body_size 16m;
    {splits}
    server {{
        listen {port} ssl;
        ssl_certificate {tls}/tls.crt;
        ssl_certificate_key {tls}/tls.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        # A path that could be routed other than it reads never reaches a location (400).
{refused}
        set $gco_version {primary};
        add_header {version_header} $gco_version always;
        location = {health} {{ return 200 "ok\\n"; }}
{locations}
        location / {{ return 404; }}
    }}
}}
"""
