"""The Region's route on the local stack: `/inference/<name>` to the endpoint's engines, canary honoured.

In a cluster the shared `inference-proxy` (nginx) serves the configuration the reconciler renders
into the ConfigMap `inference-proxy-routes`, and Kubernetes Services send each upstream's traffic
to ready pods. Here there is no cluster DNS and no Service network, so this router plays both:
on every request it reads the same rendered ConfigMap (its `routes.json`, the route table the
nginx configuration is rendered from) from the stand-in, decides with `routes.choose` (the same
rule nginx's `split_clients` applies, the draw from `random`), resolves the chosen Service's
selector to the ready engines the local kubelet runs, and forwards to one of them.

It does not model: TLS (plain HTTP on loopback), streaming (an answer is relayed whole), nginx's
timeouts and limits beyond a request body of 16 MiB, or retries on another backend.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from gco.local.kubelet import LOOPBACK, LocalKubelet
from gco.reconcile.objects import CONFIG_MAP, SERVICE, SYSTEM_NAMESPACE
from gco.reconcile.render_proxy import PROXY_CONFIG, ROUTES_JSON
from gco.reconcile.routes import HEALTH_PATH, UPSTREAM, RouteTable, choose
from gco.reconcile.standin import StandInKubeAPI

log = logging.getLogger(__name__)
MAX_BODY = 16 << 20
FORWARD_TIMEOUT_S = 600.0
UPSTREAM_HEADER = "x-gco-upstream"  # which Service answered (the local router adds it; nginx does not)


class LocalRouter:
    """The Region's proxy on a loopback port; `url` is its base (`<url>/inference/<name>/...`).

    Parameters:
        api: the Region's stand-in (the rendered routes and the Services are read from it).
        kubelet: the Region's engine runner (the ready backends of a Service).
        port: the port to listen on (0: any free one).
        rng: the draw for canary decisions (injectable for tests).
    """

    def __init__(
        self,
        api: StandInKubeAPI,
        kubelet: LocalKubelet,
        *,
        port: int = 0,
        rng: random.Random | None = None,
    ) -> None:
        self.api = api
        self.kubelet = kubelet
        self.rng = rng or random.Random()
        self._rng_lock = threading.Lock()
        self._client = httpx.Client(timeout=FORWARD_TIMEOUT_S)
        router = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                router.handle(self)

            def do_POST(self) -> None:
                router.handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("router: " + format, *args)

        self._server = ThreadingHTTPServer((LOOPBACK, port), Handler)
        self._server.daemon_threads = True
        self.url = f"http://{LOOPBACK}:{self._server.server_address[1]}"
        self._thread: threading.Thread | None = None

    def table(self) -> RouteTable:
        """The route table as last rendered by the reconciler (empty before its first render)."""
        config = self.api.get(CONFIG_MAP, SYSTEM_NAMESPACE, PROXY_CONFIG)
        data = ((config or {}).get("data") or {}).get(ROUTES_JSON)
        return RouteTable.model_validate_json(data) if data else RouteTable(routes=())

    def resolve(self, path: str) -> tuple[str, str] | None:
        """(backend URL, Service name) for `path`: the route's choice, then one ready engine of it."""
        with self._rng_lock:
            draw = self.rng.random()
        chosen = choose(self.table(), path.split("?", 1)[0], draw)
        if chosen is None:
            return None
        upstream, rest = chosen
        match = UPSTREAM.match(upstream)
        if match is None:
            return None
        service_name, namespace, _ = match["host"].split(".")
        service = self.api.get(SERVICE, namespace, service_name)
        selector = ((service or {}).get("spec") or {}).get("selector") or {}
        backends = self.kubelet.backends(namespace, selector)
        if not backends:
            return "", service_name
        query = "?" + path.split("?", 1)[1] if "?" in path else ""
        with self._rng_lock:
            backend = self.rng.choice(backends)
        return backend + rest + query, service_name

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("content-length") or 0)
        if length > MAX_BODY:
            self._answer(request, 413, b'{"error":"request body too large"}')
            return
        body = request.rfile.read(length) if length else b""
        if request.path == HEALTH_PATH:
            self._answer(request, 200, b"ok\n", "text/plain")
            return
        resolved = self.resolve(request.path)
        if resolved is None:
            self._answer(request, 404, b'{"error":"no route"}')
            return
        target, service = resolved
        if not target:
            self._answer(request, 503, json.dumps({"error": f"no ready backend for {service}"}).encode())
            return
        try:
            headers = {"content-type": request.headers.get("content-type") or "application/json"}
            answer = self._client.request(request.command, target, content=body, headers=headers)
        except httpx.HTTPError as error:
            self._answer(request, 502, json.dumps({"error": f"{service}: {error}"}).encode())
            return
        ctype = answer.headers.get("content-type", "application/json")
        self._answer(request, answer.status_code, answer.content, ctype, service)

    @staticmethod
    def _answer(
        request: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        ctype: str = "application/json",
        upstream: str | None = None,
    ) -> None:
        request.send_response(status)
        request.send_header("content-type", ctype)
        request.send_header("content-length", str(len(body)))
        if upstream:
            request.send_header(UPSTREAM_HEADER, upstream)
        request.end_headers()
        request.wfile.write(body)

    def start(self) -> LocalRouter:
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="local-router",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()
