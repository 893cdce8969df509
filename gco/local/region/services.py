"""The Service network on the local stack: a loopback address per Service, sending each request to
one of its ready engines (what kube-proxy and the Service's endpoints do in a cluster).

The Region's proxy (nginx with the rendered configuration, or the in-process router) sends a
route's traffic to `<service>.<namespace>.svc:<port>`; here each such Service gets a loopback
listener (`address`), started on first use, that resolves the Service's selector against the
ready engines of `LocalKubelet` on every request, picks one at random, relays the request, and
names the Service in the `x-gco-upstream` answer header (so a caller can count a canary split).
Answers are relayed as they arrive (`relay`: chunk by chunk, as nginx with `proxy_buffering off`),
so server-sent events reach the caller while the engine is still generating.

Before it relays a request to an engine, it asks the stand-in whether the NetworkPolicies stored
there admit the connection (`StandInKubeAPI.admits`, Kubernetes' rules as
`gco.local.standin.network_policy` models them): from the Region's proxy (a pod of `gco-system` with
the proxy's labels, the source of every address `address` hands out by default) or from the source
another address was made for (`address(..., source=Peer(...))`, how a test plays another pod), to the
Service's `targetPort` of the engine's pod. A connection no policy admits is answered 504 at once,
naming the policy check (in a cluster its packets are dropped and the proxy times out).

It does not model: session affinity, `targetPort` by number (engines listen where the kubelet put
them), or Services that no route names.
"""

from __future__ import annotations

import logging
import random
import sys
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from gco.front_door import GENERATION_TIMEOUT_S, MAX_REQUEST_BYTES
from gco.local.errors import PolicyDeniedError
from gco.local.processes.listen import LOOPBACK
from gco.local.region.kubelet import LocalKubelet
from gco.local.standin import StandInKubeAPI
from gco.local.standin.network_policy import Peer, Port
from gco.reconcile.objects import SERVICE, SYSTEM_NAMESPACE
from gco.reconcile.proxy.proxy_conf import proxy_error_body
from gco.reconcile.proxy.render_proxy import proxy_labels

log = logging.getLogger(__name__)
# The longest wait for the next bytes of an answer: the front door's limit on a whole generation.
FORWARD_TIMEOUT_S = float(GENERATION_TIMEOUT_S)
TOO_LARGE = proxy_error_body(413)
UPSTREAM_HEADER = "x-gco-upstream"  # which Service answered (added by the local Service network)
PROXY_SOURCE = Peer(SYSTEM_NAMESPACE, proxy_labels())  # the Region's proxy, as a pod of gco-system


def answer(
    request: BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    ctype: str = "application/json",
    upstream: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Write one whole HTTP answer (`headers`: any further response headers)."""
    request.send_response(status)
    request.send_header("content-type", ctype)
    request.send_header("content-length", str(len(body)))
    if upstream:
        request.send_header(UPSTREAM_HEADER, upstream)
    for key, value in (headers or {}).items():
        request.send_header(key, value)
    request.end_headers()
    request.wfile.write(body)


def relay(
    request: BaseHTTPRequestHandler,
    reply: httpx.Response,
    upstream: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Answer `request` with the upstream `reply` as it arrives: its status and content type, then
    its body in HTTP/1.1 chunks, each written as soon as it is read (the request's socket writer is
    unbuffered). An upstream that fails mid-body ends the answer without its last chunk, so the
    caller sees a truncated answer, as from nginx; a caller that hangs up ends the relay (the
    upstream request is closed with the stream). `headers`: any further response headers."""
    request.send_response(reply.status_code)
    request.send_header("content-type", reply.headers.get("content-type", "application/json"))
    request.send_header("transfer-encoding", "chunked")
    if upstream:
        request.send_header(UPSTREAM_HEADER, upstream)
    for key, value in (headers or {}).items():
        request.send_header(key, value)
    try:
        request.end_headers()
        for chunk in reply.iter_bytes():
            if chunk:
                request.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        request.wfile.write(b"0\r\n\r\n")
    except (httpx.HTTPError, OSError):  # the upstream broke, or the caller hung up (BrokenPipeError)
        request.close_connection = True


class _RelayServer(ThreadingHTTPServer):
    """A threaded server that takes a caller's reset of its connection as the caller leaving."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        # nginx resets an idle keep-alive connection to an upstream when it closes it; the handler
        # is then waiting for the next request line and reads ECONNRESET. That is a caller hanging
        # up, not a fault of the relay: logged, not printed as a traceback into the walk-through.
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionResetError):
            log.debug("%s reset the connection", client_address)
            return
        super().handle_error(request, client_address)


def serve(handle: Any, name: str, port: int = 0) -> ThreadingHTTPServer:
    """A threaded loopback HTTP server calling `handle(request)` for every method, on a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            handle(self)

        def do_POST(self) -> None:
            handle(self)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(name + ": " + format, *args)

    server = _RelayServer((LOOPBACK, port), Handler)
    server.daemon_threads = True
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True
    ).start()
    return server


def read_body(request: BaseHTTPRequestHandler) -> bytes | None:
    """The request body, or None (answered 413, the connection closed, the body unread) when it is
    larger than `MAX_REQUEST_BYTES`, the proxy's `client_max_body_size`."""
    length = int(request.headers.get("content-length") or 0)
    if length > MAX_REQUEST_BYTES:
        request.close_connection = True
        answer(request, 413, TOO_LARGE, headers={"connection": "close"})
        return None
    return request.rfile.read(length) if length else b""


class ServiceNetwork:
    """Loopback addresses for the Services of one stand-in cluster; `stop()` closes them all."""

    def __init__(self, api: StandInKubeAPI, kubelet: LocalKubelet, rng: random.Random | None = None) -> None:
        self.api = api
        self.kubelet = kubelet
        self.rng = rng or random.Random()
        self._rng_lock = threading.Lock()
        self._lock = threading.Lock()
        self._servers: dict[tuple[str, str, object], ThreadingHTTPServer] = {}
        self._client = httpx.Client(timeout=FORWARD_TIMEOUT_S)

    def address(self, namespace: str, service: str, source: Peer = PROXY_SOURCE) -> str:
        """`127.0.0.1:<port>` of the Service as `source` reaches it (its listener starts on first use)."""
        key = (namespace, service, source.key)
        with self._lock:
            server = self._servers.get(key)
            if server is None:
                server = serve(
                    lambda request: self._forward(namespace, service, request, source), f"svc-{service}"
                )
                self._servers[key] = server
            return f"{LOOPBACK}:{server.server_address[1]}"

    def backend(self, namespace: str, service: str, source: Peer = PROXY_SOURCE) -> str | None:
        """One ready engine's base URL behind the Service, or None.

        Raises:
            PolicyDeniedError: there are ready engines, but no NetworkPolicy admits `source` to them.
        """
        obj = self.api.get(SERVICE, namespace, service)
        spec = (obj or {}).get("spec") or {}
        targets = self.kubelet.targets(namespace, spec.get("selector") or {})
        if not targets:
            return None
        target_port = ((spec.get("ports") or [{}])[0]).get("targetPort")
        port = Port(name=target_port) if isinstance(target_port, str) else Port(number=target_port)
        admitted = [url for url, labels in targets if self.api.admits(Peer(namespace, labels), port, source)]
        if not admitted:
            raise PolicyDeniedError(
                f"no NetworkPolicy of {namespace} admits {source.namespace} pods to {service}"
            )
        with self._rng_lock:
            return self.rng.choice(admitted)

    def _forward(self, namespace: str, service: str, request: BaseHTTPRequestHandler, source: Peer) -> None:
        body = read_body(request)
        if body is None:
            return
        try:
            target = self.backend(namespace, service, source)
        except PolicyDeniedError as error:
            answer(request, 504, proxy_error_body(504, str(error)))
            return
        if target is None:
            answer(request, 503, proxy_error_body(503, f"no ready backend for {service}"))
            return
        headers = {"content-type": request.headers.get("content-type") or "application/json"}
        try:
            with self._client.stream(
                request.command, target + request.path, content=body, headers=headers
            ) as reply:
                relay(request, reply, service)
        except httpx.HTTPError as error:  # no answer began: relay ends a broken body itself
            answer(request, 502, proxy_error_body(502, f"{service}: {error}"))

    def stop(self) -> None:
        with self._lock:
            servers = list(self._servers.values())
            self._servers.clear()
        for server in servers:
            server.shutdown()
            server.server_close()
        self._client.close()
