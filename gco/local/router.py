"""The Region's proxy in-process, where nginx is not installed: `/inference/<name>` to the route's
Service, canary honoured.

It reads, on every request, the configuration the reconciler rendered for the shared proxy (the
ConfigMap `inference-proxy-routes`, its `routes.json`: the route table the nginx configuration is
rendered from), decides with `routes.pick` (the rule nginx's `split_clients` applies; the draw
from `random`), and relays the request, prefix stripped, to the chosen Service's loopback address
on the local Service network, answering with the version that answered (`X-Gco-Version`). A path
the rendered nginx refuses (`gco.endpoints.paths`) is refused here too, with 400.
`gco.local.nginx` runs the real nginx instead where it is installed.

Answers are relayed as they arrive (`services.relay`), as nginx does with `proxy_buffering off`.
It does not model: TLS (plain HTTP on loopback), or nginx's timeouts and limits beyond a 16 MiB
request body and the read timeout (`FORWARD_TIMEOUT_S`, the front door's limit).
"""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler

import httpx

from gco.endpoints.paths import escape_reason
from gco.local.kubelet import LOOPBACK
from gco.local.services import (
    FORWARD_TIMEOUT_S,
    UPSTREAM_HEADER,
    ServiceNetwork,
    answer,
    read_body,
    relay,
    serve,
)
from gco.local.standin import StandInKubeAPI
from gco.reconcile.objects import CONFIG_MAP, SYSTEM_NAMESPACE
from gco.reconcile.render_proxy import PROXY_CONFIG, ROUTES_JSON
from gco.reconcile.routes import HEALTH_PATH, UPSTREAM, VERSION_HEADER, RouteTable, pick


def rendered_table(api: StandInKubeAPI) -> RouteTable:
    """The route table as last rendered by the reconciler (empty before its first render)."""
    config = api.get(CONFIG_MAP, SYSTEM_NAMESPACE, PROXY_CONFIG)
    data = ((config or {}).get("data") or {}).get(ROUTES_JSON)
    return RouteTable.model_validate_json(data) if data else RouteTable(routes=())


class LocalRouter:
    """The proxy on a loopback port; `url` is its base (`<url>/inference/<name>/...`).

    Parameters:
        api: the Region's stand-in (the rendered routes are read from it).
        services: the Region's Service network.
        port: the port to listen on (0: any free one).
        rng: the draw for canary decisions (injectable for tests).
    """

    def __init__(
        self,
        api: StandInKubeAPI,
        services: ServiceNetwork,
        *,
        port: int = 0,
        rng: random.Random | None = None,
    ) -> None:
        self.api = api
        self.services = services
        self.rng = rng or random.Random()
        self._rng_lock = threading.Lock()
        self._client = httpx.Client(timeout=FORWARD_TIMEOUT_S)
        self._server = serve(self.handle, "local-router", port)
        self.url = f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        body = read_body(request)
        if body is None:
            return
        if request.path == HEALTH_PATH:
            answer(request, 200, b"ok\n", "text/plain")
            return
        path, sep, query = request.path.partition("?")
        refused = escape_reason(path)
        if refused is not None:
            answer(request, 400, json.dumps({"error": f"the path {refused}"}).encode())
            return
        with self._rng_lock:
            draw = self.rng.random()
        chosen = pick(rendered_table(self.api), path, draw)
        match = UPSTREAM.match(chosen[0]) if chosen else None
        if chosen is None or match is None:
            answer(request, 404, b'{"error":"no route"}')
            return
        service, namespace, _ = match["host"].split(".")
        target = f"http://{self.services.address(namespace, service)}{chosen[1]}{sep}{query}"
        headers = {"content-type": request.headers.get("content-type") or "application/json"}
        try:
            with self._client.stream(request.command, target, content=body, headers=headers) as reply:
                relay(request, reply, reply.headers.get(UPSTREAM_HEADER), {VERSION_HEADER: chosen[2]})
        except httpx.HTTPError as error:  # no answer began: relay ends a broken body itself
            answer(request, 502, json.dumps({"error": f"{service}: {error}"}).encode())

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()
