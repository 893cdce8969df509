"""The Region's proxy in-process, where nginx is not installed: `/inference/<name>` to the route's
Service, canary honoured.

It reads, on every request, the routes the route keeper stored for the shared proxy (the route shards'
tables, `route_shards.py`: what the nginx maps are rendered from; a shard is parsed again only when it
changed), decides with `routes.pick` (the lookup by name nginx's `map` makes, and the rule its
`split_clients` applies, the draw from `random`; or the version the request pins by its
`X-Gco-Version` header), and relays the request, prefix stripped, to the chosen
Service's loopback address on the local Service network, answering with the version that answered (`X-Gco-
Version`). A path the rendered nginx refuses (`gco.endpoints.paths`) is refused here too, with 400.
`gco.local.region.nginx` runs the real nginx instead where it is installed. It registers itself with
the stand-in as the proxy's Pod, whose status port (through the pod proxy) answers what it routes, as
the deployed proxy's does, so the reconciler's `running` waits for it the same way.

Answers are relayed as they arrive (`services.relay`), as nginx does with `proxy_buffering off`.
It does not model: TLS (plain HTTP on loopback), or nginx's timeouts and limits beyond a 16 MiB
request body and the read timeout (`FORWARD_TIMEOUT_S`, the front door's limit).
"""

from __future__ import annotations

import random
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx

from gco.endpoints.paths import INGRESS_PREFIX, target_reason
from gco.local.processes.listen import LOOPBACK
from gco.local.region.services import (
    FORWARD_TIMEOUT_S,
    UPSTREAM_HEADER,
    ServiceNetwork,
    answer,
    read_body,
    relay,
    serve,
)
from gco.local.region.volume import MountedShards
from gco.local.standin import StandInKubeAPI
from gco.reconcile.objects import CONFIG_MAP, SYSTEM_NAMESPACE, selector
from gco.reconcile.proxy.proxy_conf import proxy_error_body
from gco.reconcile.proxy.render_proxy import proxy_labels
from gco.reconcile.proxy.route_shards import (
    merged,
    route_digest,
    shard_labels,
    shard_number,
    shard_table,
    version_of,
    versions_answer,
)
from gco.reconcile.proxy.routes import (
    HEALTH_PATH,
    STATUS_PORT,
    STATUS_ROUTE_PATH,
    STATUS_SHARDS_PATH,
    UPSTREAM,
    VERSION_HEADER,
    RouteTable,
    pick,
    pinned_version,
)

LOCAL_PROXY_POD = "inference-proxy-local"  # the local proxy's Pod, as the stand-in lists it


class ShardReader:
    """The routes the route keeper stored in a Region's route shards (`route_shards.py`), as one table.

    A shard is read again only when its resourceVersion changed, so reading the routes of a Region
    whose routes did not change parses nothing. With `volume`, the shards are those the proxy pod's
    projected volume holds (`gco.local.region.volume`: as the kubelet last synced them), as nginx
    reads them in EKS; without, those stored now.
    """

    def __init__(self, api: StandInKubeAPI, volume: MountedShards | None = None) -> None:
        self.api = api
        self.volume = volume
        self._lock = threading.Lock()
        self._shards: dict[str, tuple[str, RouteTable]] = {}
        self._table = RouteTable()

    def shards(self) -> list[dict[str, Any]]:
        """The shard ConfigMaps as mounted (with `volume`) or as stored."""
        if self.volume is not None:
            return self.volume.read()
        return self.api.list(CONFIG_MAP, SYSTEM_NAMESPACE, selector(shard_labels()))[0]

    def versions(self) -> dict[int, str]:
        """Each shard's version as its data declares it (`route_shards.version_of`; a shard without
        one is left out), of the same shards `table` reads."""
        found: dict[int, str] = {}
        for obj in self.shards():
            number = shard_number(str(obj["metadata"]["name"]))
            version = version_of(number, obj.get("data")) if number is not None else None
            if number is not None and version is not None:
                found[number] = version
        return found

    def table(self) -> RouteTable:
        with self._lock:
            fresh: dict[str, tuple[str, RouteTable]] = {}
            for obj in self.shards():
                meta = obj["metadata"]
                version, name = str(meta.get("resourceVersion")), str(meta["name"])
                kept = self._shards.get(name)
                if kept is not None and kept[0] == version:
                    fresh[name] = kept
                    continue
                number = shard_number(name)
                table = shard_table(number, obj.get("data")) if number is not None else None
                fresh[name] = (version, table or RouteTable())
            if fresh != self._shards:
                self._shards = fresh
                self._table = merged(table for _, table in fresh.values())
            return self._table


def status_answer(reader: ShardReader, port: int, path: str) -> tuple[int, str]:
    """What the proxy's status port answers for `GET path` with the shards `reader` reads loaded
    (`proxy_conf.py`): every shard's version, or one route's digest."""
    if port == STATUS_PORT and path == STATUS_SHARDS_PATH:
        return 200, versions_answer(reader.versions())
    table = reader.table()
    name = path.removeprefix(STATUS_ROUTE_PATH)
    route = table.by_path.get(INGRESS_PREFIX + name) if port == STATUS_PORT and path != name else None
    return (200, route_digest(route) + "\n") if route is not None else (404, "no route\n")


def proxy_pod(name: str, ready: bool) -> dict[str, Any]:
    """The local proxy as the API server lists its Pod (labels, and the Ready condition)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE, "labels": proxy_labels()},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]},
    }


class LocalRouter:
    """The proxy on a loopback port; `url` is its base (`<url>/inference/<name>/...`).

    Parameters:
        api: the Region's stand-in (the rendered routes are read from it).
        services: the Region's Service network.
        port: the port to listen on (0: any free one).
        rng: the draw for canary decisions (injectable for tests).
        kubelet_sync_s: the modelled kubelet's sync period (`gco.local.region.volume`; 0: the routes
            as stored, with no volume delay).
    """

    def __init__(
        self,
        api: StandInKubeAPI,
        services: ServiceNetwork,
        *,
        port: int = 0,
        rng: random.Random | None = None,
        kubelet_sync_s: float = 0.0,
    ) -> None:
        self.api = api
        self.services = services
        self.routes = ShardReader(api, MountedShards(api, LOCAL_PROXY_POD, sync_s=kubelet_sync_s))
        self.rng = rng or random.Random()
        self._rng_lock = threading.Lock()
        self._client = httpx.Client(timeout=FORWARD_TIMEOUT_S)
        self._server = serve(self.handle, "local-router", port)
        self.url = f"http://{LOOPBACK}:{self._server.server_address[1]}"
        api.register_pod(proxy_pod(LOCAL_PROXY_POD, ready=True), self.status)

    def status(self, port: int, path: str) -> tuple[int, str]:
        """The status port's answer (`proxy_conf.py`), from the routes it routes by."""
        return status_answer(self.routes, port, path)

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        body = read_body(request)
        if body is None:
            return
        if request.path == HEALTH_PATH:
            answer(request, 200, b"ok\n", "text/plain")
            return
        path, sep, query = request.path.partition("?")
        refused = target_reason(request.path)
        if refused is not None:
            answer(request, 400, proxy_error_body(400, f"the path {refused}"))
            return
        with self._rng_lock:
            draw = self.rng.random()
        chosen = pick(self.routes.table(), path, draw, pinned_version(request.headers.get(VERSION_HEADER)))
        match = UPSTREAM.match(chosen[0]) if chosen else None
        if chosen is None or match is None:
            answer(request, 404, proxy_error_body(404))
            return
        service, namespace, _ = match["host"].split(".")
        target = f"http://{self.services.address(namespace, service)}{chosen[1]}{sep}{query}"
        headers = {"content-type": request.headers.get("content-type") or "application/json"}
        try:
            with self._client.stream(request.command, target, content=body, headers=headers) as reply:
                relay(request, reply, reply.headers.get(UPSTREAM_HEADER), {VERSION_HEADER: chosen[2]})
        except httpx.HTTPError as error:  # no answer began: relay ends a broken body itself
            answer(request, 502, proxy_error_body(502, f"{service}: {error}"))

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()
