"""The rendered proxy configuration adapted to loopback: routes, canary split and rewrite kept."""

from __future__ import annotations

from pathlib import Path

from gco.local.nginx import local_conf
from gco.reconcile.routes import Route, RouteTable, nginx_conf

TABLE = RouteTable(
    routes=(
        Route(
            endpoint="smol",
            path="/inference/smol",
            upstream="http://smol.gco-inference.svc:8000",
            canary_upstream="http://smol--canary.gco-inference.svc:8000",
            canary_weight=30,
        ),
    )
)
ADDRESSES = {"smol.gco-inference.svc": "127.0.0.1:4001", "smol--canary.gco-inference.svc": "127.0.0.1:4002"}


def test_local_conf_keeps_routing_and_moves_machine_specifics() -> None:
    rendered = nginx_conf(TABLE)
    conf = local_conf(
        rendered, ADDRESSES, port=9443, tls_dir=Path("/run/gco/tls"), run_dir=Path("/run/gco/r")
    )
    assert "resolver" not in conf and "cluster.local" not in conf
    assert "        30% 127.0.0.1:4002;" in conf and "        * 127.0.0.1:4001;" in conf
    assert "listen 127.0.0.1:9443 ssl;" in conf
    assert "ssl_certificate /run/gco/tls/tls.crt;" in conf
    assert "pid /run/gco/r/nginx.pid;" in conf and " /tmp/" not in conf
    assert "worker_processes 1;" in conf
    # everything else as rendered: the split on $request_id, the prefix rewrite, health and 404
    kept = [line for line in rendered.splitlines() if "split_clients" in line or "rewrite" in line]
    assert kept and all(line in conf for line in kept)
    assert 'location = /healthz { return 200 "ok\\n"; }' in conf and "location / { return 404; }" in conf
