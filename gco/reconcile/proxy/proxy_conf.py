"""The shared proxy's nginx.conf, rendered as a pure function: the same file for any set of routes.

Routes are not in this file. Three `map` blocks keyed by the endpoint name include the route
shards' map files (`route_shards.py`) from the proxy's projected volume (`ROUTES_DIR`), so:

- a request's endpoint is found by a hash lookup of the name its path begins with (one regex
  `location` for every route, then `map`), not by matching one `location` per route: routing costs
  the same at 10 routes as at 10,000 (`benchmarks/route_scale.py`);
- a route change rewrites a shard's files, which the kubelet updates in the running pod, and a
  reload (`render_proxy.RELOADER`) makes nginx read them: the pod's template, and so the
  Deployment, never changes for a route, and nothing rolls;
- the canary decision is one of a fixed 99 `split_clients` blocks (weights 1-99, each over
  `$request_id` as before), chosen by the route's weight with a `map`; weight 0 is always the
  primary and 100 always the canary. The version header and the upstream are read from that one
  decision;
- a request may pin its version by name with the request header `X-Gco-Version: primary|canary`
  (`routes.VERSION_HEADER`; what a rollout's analysis traffic sends, `gco.rollout`): one more `map`,
  over the header, whose default is the weighted decision, so a request without it (or with any
  other value) is split as before and the cost stays one hash lookup whatever the number of routes.
  A request pinned to the canary of an endpoint that has none is 404, never the primary.

A second server on `STATUS_PORT` (no Service, load balancer or route reaches it; the API server's
pod proxy does) answers `GET /routes/<name>` with the digest of the route this pod's nginx serves
for the endpoint (`route_shards.route_digest`), or 404: how the reconciler knows that a request
through every ready proxy pod reaches the endpoint before it reports the endpoint `running`. It also
answers `GET /shards` with the version of every route shard this pod's nginx loaded
(`route_shards.shard_version`, one `NN <version>` line a shard, the version empty for a shard it has
none of), so that one question a pod covers every endpoint of a batch whose shard it loaded as
written. nginx evaluates a `map` for one key a request, so each shard has a `map` of its own whose
source is the constant shard number (a map's source may be any text,
https://nginx.org/en/docs/http/ngx_http_map_module.html#map) over every shard's `NN.version.map`
(64 lines in all); the reply names the 64 variables.

nginx streams answers (`proxy_buffering off`) and waits `GENERATION_TIMEOUT_S` between reads and
writes, the front door's limit on a generation.

With a global address (`forwarding.Forwarding`), a routed request whose `X-Gco-Serve-Region` names
another Region of the deployment, and that carries no `X-Gco-Hop`, is proxied as sent (path, query,
body, `Authorization`) to `https://<that Region>.<domain>` with `X-Gco-Hop: 1`, streamed like any
answer. One `map` decides it from the two headers, so the decision costs a hash lookup; a hop request
or an unknown Region maps to nothing and is served here. The remote name is resolved at request time
(`resolver`), sent as SNI and verified against the system CA bundle
(https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_ssl_verify). Without it the
file has no forwarding at all.
"""

from __future__ import annotations

from gco.endpoints.paths import INGRESS_PREFIX, NGINX_REFUSED, NGINX_ROUTE_CHECK
from gco.front_door import (
    GENERATION_TIMEOUT_S,
    HOP_HEADER,
    HOP_VALUE,
    MAX_REQUEST_BYTES,
    SERVE_REGION_HEADER,
    error_body,
)
from gco.reconcile.proxy.route_shards import (
    CANARY_MAP,
    DIGEST_MAP,
    PRIMARY_MAP,
    SHARDS,
    VERSION_MAP,
    WEIGHT_MAP,
)
from gco.reconcile.proxy.routes import (
    CANARY,
    HEALTH_PATH,
    PRIMARY,
    PROXY_PORT,
    RESOLVER,
    ROUTES_DIR,
    STATUS_PORT,
    STATUS_ROUTE_PATH,
    STATUS_SHARDS_PATH,
    TLS_DIR,
    VERSION_HEADER,
)
from gco.reconcile.proxy_forwarding import CA_BUNDLE, VERIFY_DEPTH, Forwarding

# nginx builds each `map` into a hash; a map of 10,000 names needs a larger table than its default
# (`map_hash_max_size` 2048) and buckets that fit a 54-character name
# (https://nginx.org/en/docs/http/ngx_http_map_module.html#map_hash_max_size).
MAP_HASH_MAX_SIZE = 262144
MAP_HASH_BUCKET_SIZE = 128
NAME_CAPTURE = "[a-z0-9-]+"


def _splits() -> str:
    """One `split_clients` per canary weight 1-99, each over the request id (the same draw)."""
    return "\n    ".join(
        f'split_clients "${{request_id}}" $gco_split_{weight} {{ {weight}% {CANARY}; * {PRIMARY}; }}'
        for weight in range(1, 100)
    )


def _version_entries() -> str:
    entries = [f"100 {CANARY};"] + [f"{weight} $gco_split_{weight};" for weight in range(1, 100)]
    return "\n        ".join(entries)


def _shard_variable(shard: int) -> str:
    return f"$gco_shard_{shard:02d}"


def _shard_maps() -> str:
    """One `map` a route shard: its constant number looked up in every shard's version file."""
    return "\n    ".join(
        f"map {shard:02d} {_shard_variable(shard)} {{ include {ROUTES_DIR}/*{VERSION_MAP}; }}"
        for shard in range(SHARDS)
    )


def _shard_lines() -> str:
    """The `GET /shards` answer: `NN <version>` a shard (nginx's `\\n` escape ends each line)."""
    return "".join(f"{shard:02d} {_shard_variable(shard)}\\n" for shard in range(SHARDS))


def header_variable(header: str) -> str:
    """nginx's variable of a request header: `$http_` and its name lowercased, dashes as underscores
    (https://nginx.org/en/docs/http/ngx_http_core_module.html#var_http_)."""
    return "$http_" + header.lower().replace("-", "_")


def _forwarding(forwarding: Forwarding | None) -> tuple[str, str]:
    """(the http-level forwarding directives, the routed location's forwarding `if`); empty without."""
    if forwarding is None:
        return "", ""
    entries = "\n        ".join(
        f'":{region}" {forwarding.remote_name(region)};' for region in forwarding.others
    )
    http = f"""    # Forwarding to the serving Region the front door chose, once (docs/global.md).
    map "{header_variable(HOP_HEADER)}:{header_variable(SERVE_REGION_HEADER)}" $gco_remote {{
        default "";
        {entries}
    }}
    map $gco_remote $gco_hop_out {{
        "" "";
        default {HOP_VALUE};
    }}
    # A forwarded answer carries the serving Region's version header, not one decided here.
    map $gco_remote $gco_version_out {{
        "" $gco_version;
        default "";
    }}
    proxy_set_header {HOP_HEADER} $gco_hop_out;
    proxy_ssl_server_name on;
    proxy_ssl_verify on;
    proxy_ssl_verify_depth {VERIFY_DEPTH};
    proxy_ssl_trusted_certificate {CA_BUNDLE};
    proxy_ssl_protocols TLSv1.2 TLSv1.3;
"""
    location = """            if ($gco_remote != "") {
                proxy_pass https://$gco_remote;
                break;
            }
"""
    return http, location


def nginx_conf(forwarding: Forwarding | None = None) -> str:
    """The proxy's whole nginx.conf (module docstring); `forwarding` adds the one hop to another Region."""
    forward_http, forward_location = _forwarding(forwarding)
    return _TEMPLATE.format(
        forward_http=forward_http,
        forward_location=forward_location,
        version_variable="$gco_version" if forwarding is None else "$gco_version_out",
        resolver=RESOLVER,
        map_max=MAP_HASH_MAX_SIZE,
        map_bucket=MAP_HASH_BUCKET_SIZE,
        splits=_splits(),
        routes=ROUTES_DIR,
        primary_map=PRIMARY_MAP,
        canary_map=CANARY_MAP,
        weight_map=WEIGHT_MAP,
        digest_map=DIGEST_MAP,
        versions=_version_entries(),
        canary=CANARY,
        primary=PRIMARY,
        port=PROXY_PORT,
        tls=TLS_DIR,
        health=HEALTH_PATH,
        timeout=GENERATION_TIMEOUT_S,
        max_body=MAX_REQUEST_BYTES,
        refused="\n".join(
            f"        if ($request_uri ~* \"{rule}\") {{ return 400 '{_refused_body()}'; }}"
            for rule in NGINX_REFUSED
        ),
        route_check=NGINX_ROUTE_CHECK,
        version_header=VERSION_HEADER,
        pin_variable=header_variable(VERSION_HEADER),
        prefix=INGRESS_PREFIX,
        name=NAME_CAPTURE,
        status_port=STATUS_PORT,
        status_path=STATUS_ROUTE_PATH,
        shards_path=STATUS_SHARDS_PATH,
        shard_maps=_shard_maps(),
        shard_lines=_shard_lines(),
        error_pages=_error_pages(),
        refused_body=_refused_body(),
    )


# The statuses nginx answers itself on the routed server, each with the message, type and code of its
# error body (`gco.front_door.error_body`); (nginx's status, the one sent). Each body is written
# single-quoted into nginx.conf: no message may hold a quote or a `$` (nginx's variables). A refused
# path's 400 is answered with its body where it is refused (`_refused_body`). A request nginx refuses
# while it still parses it (a NUL in its path, a request line or headers too long: 400, 414, 494; a
# transfer encoding it does not know: 501) keeps nginx's own page: an error page is an internal
# redirect, which such a request cannot take (nginx answers it 500 instead).
REFUSED_PATH = ("the request path is refused", "invalid_request_error", "bad_path")
PROXY_ERRORS: dict[tuple[int, int], tuple[str, str, str]] = {
    (400, 400): REFUSED_PATH,
    (404, 404): ("no such endpoint in this Region", "invalid_request_error", "not_found"),
    (413, 413): (
        f"the request body is larger than {MAX_REQUEST_BYTES} bytes",
        "invalid_request_error",
        "request_too_large",
    ),
    (500, 500): ("the proxy of this Region failed", "server_error", "proxy_error"),
    (502, 502): ("no engine answered the proxy of this Region", "server_error", "bad_gateway"),
    (503, 503): ("no ready engine in this Region", "server_error", "unavailable"),
    (504, 504): ("the engine did not answer in time", "server_error", "gateway_timeout"),
}


def proxy_error_body(sent: int, detail: str = "") -> bytes:
    """The body of `sent` as the proxy answers it itself (PROXY_ERRORS), `detail` after its message:
    what the local stand-ins of the proxy and of a Service answer too, in the same shape.

    Raises:
        KeyError: the proxy never answers `sent` itself.
    """
    found = [known for (_, status), known in PROXY_ERRORS.items() if status == sent]
    if not found:
        raise KeyError(sent)
    message, kind, code = found[0]
    return error_body(f"{message}: {detail}" if detail else message, kind, code)


def _refused_body() -> str:
    """The JSON body of a path the proxy refuses (400), returned where it is refused."""
    return error_body(*REFUSED_PATH).decode()


def _error_pages() -> str:
    """`error_page` for each of PROXY_ERRORS but the refused path's 400 (`_refused_body`), answered by a
    named location with its JSON body."""
    lines = []
    for (status, sent), (message, kind, code) in PROXY_ERRORS.items():
        if status == 400:
            continue
        body = error_body(message, kind, code).decode()
        answer = f"={sent} " if sent != status else ""
        lines.append(f"        error_page {status} {answer}@gco_{status};")
        lines.append(
            f"        location @gco_{status} {{ default_type application/json; return {sent} '{body}'; }}"
        )
    return "\n".join(lines)


_TEMPLATE = """\
# Rendered by the gco reconciler; do not edit. The routes are in {routes} (the route shards).
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
    client_max_body_size {max_body};
    # A body up to the limit is held in memory, never written to client_body_temp_path: no prompt
    # lands on the proxy's disk, and a worker that cannot write that directory (the local stack's
    # nginx, whose workers run as another user than its master) still serves it. nginx allocates
    # a smaller Content-Length's own size, not this much (ngx_http_read_client_request_body).
    client_body_buffer_size {max_body};
    map_hash_max_size {map_max};
    map_hash_bucket_size {map_bucket};
{forward_http}    # The endpoint's routes, by name ($gco_name, from the routed or the status location).
    map $gco_name $gco_primary {{
        default "";
        include {routes}/*{primary_map};
    }}
    map $gco_name $gco_canary {{
        default "";
        include {routes}/*{canary_map};
    }}
    map $gco_name $gco_weight {{
        default 0;
        include {routes}/*{weight_map};
    }}
    map $gco_name $gco_route_digest {{
        default "";
        include {routes}/*{digest_map};
    }}
    # Each route shard's version, for the status port's `GET /shards` (module docstring).
    {shard_maps}
    # The canary decision: the split of the route's weight (weight 0: always the primary), unless the
    # request pins a version by name.
    {splits}
    map $gco_weight $gco_split_version {{
        default {primary};
        {versions}
    }}
    map {pin_variable} $gco_version {{
        {primary} {primary};
        {canary} {canary};
        default $gco_split_version;
    }}
    map $gco_version $gco_backend {{
        {canary} $gco_canary;
        default $gco_primary;
    }}
    server {{
        listen {port} ssl;
        ssl_certificate {tls}/tls.crt;
        ssl_certificate_key {tls}/tls.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        # A path that could be routed other than it reads never reaches a location (400).
{refused}
        add_header {version_header} {version_variable} always;
        # The proxy's own answers in the error shape OpenAI clients parse (an engine's answers pass as
        # they are: proxy_intercept_errors is off), for what it refuses once the request is parsed.
{error_pages}
        default_type application/json;
        location = {health} {{ default_type text/plain; return 200 "ok\\n"; }}
        location ~ ^{prefix}(?<gco_name>{name})(/|$) {{
            if ($request_uri !~ "{route_check}") {{ return 400 '{refused_body}'; }}
{forward_location}            if ($gco_primary = "") {{ return 404; }}
            if ($gco_backend = "") {{ return 404; }}
            rewrite ^{prefix}{name}/?(.*)$ /$1 break;
            proxy_pass http://$gco_backend;
        }}
        location / {{ return 404; }}
    }}
    server {{
        listen {status_port};
        access_log off;
        location ~ ^{status_path}(?<gco_name>{name})$ {{
            if ($gco_route_digest = "") {{ return 404 "no route\\n"; }}
            return 200 "$gco_route_digest\\n";
        }}
        location = {shards_path} {{ return 200 "{shard_lines}"; }}
        location / {{ return 404; }}
    }}
}}
"""
