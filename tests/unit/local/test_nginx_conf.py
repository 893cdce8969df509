"""The rendered proxy configuration adapted to loopback: routes, canary split and rewrite kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from gco.local.region.nginx import local_conf, master_looping, reload_settled, sync_action, workers
from gco.reconcile.proxy.proxy_conf import nginx_conf
from gco.reconcile.proxy.route_shards import shard_data, shard_of
from gco.reconcile.proxy.routes import Route, RouteTable

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
    rendered = nginx_conf()
    run = Path("/tmp/gco/r")
    conf = local_conf(rendered, {}, port=9443, tls_dir=Path("/run/gco/tls"), run_dir=run, status_port=9081)
    directives = "\n".join(line for line in conf.splitlines() if not line.lstrip().startswith("#"))
    assert "resolver" not in directives and "/etc/gco-proxy" not in directives
    assert "include /tmp/gco/r/routes/*.primary.map;" in conf
    assert "listen 127.0.0.1:9443 ssl;" in conf and "listen 127.0.0.1:9081;" in conf
    assert "ssl_certificate /run/gco/tls/tls.crt;" in conf
    assert "pid /tmp/gco/r/nginx.pid;" in conf and " /tmp/client_body;" not in conf
    assert "worker_processes 1;" in conf
    # everything else as rendered: the splits on $request_id, the prefix rewrite, health and 404
    kept = [line for line in rendered.splitlines() if "split_clients" in line or "rewrite" in line]
    assert kept and all(line in conf for line in kept)
    assert (
        'location = /healthz { default_type text/plain; return 200 "ok\\n"; }' in conf
        and "location / { return 404; }" in conf
    )


def test_a_shards_map_files_point_at_the_services_loopback_addresses() -> None:
    shard = shard_of("smol")
    adapted = {
        key: local_conf(text, ADDRESSES, port=9443, tls_dir=Path("/t"), run_dir=Path("/r"))
        for key, text in shard_data(shard, TABLE).items()
        if key.endswith(".map")
    }
    maps = "".join(adapted.values())
    assert "smol 127.0.0.1:4001;" in maps and "smol 127.0.0.1:4002;" in maps and "smol 30;" in maps
    assert "cluster.local" not in maps


def _process(proc: Path, pid: int, parent: int, title: str) -> None:
    entry = proc / str(pid)
    entry.mkdir()
    (entry / "stat").write_text(f"{pid} (nginx) S {parent} {pid} {pid} 0 -1")
    (entry / "cmdline").write_bytes(title.encode() + b"\0")


def test_a_reload_is_settled_only_with_one_worker_taking_connections(tmp_path: Path) -> None:
    """Mid-reload the old worker (old routes) and the new one both accept; then the old one shuts down."""
    _process(tmp_path, 10, 1, "nginx: master process nginx -c conf")
    _process(tmp_path, 11, 10, "nginx: worker process")
    _process(tmp_path, 99, 1, "nginx: worker process")  # another master's worker
    assert reload_settled(10, tmp_path)
    _process(tmp_path, 12, 10, "nginx: worker process")  # the reload's new worker
    assert not reload_settled(10, tmp_path)
    (tmp_path / "11" / "cmdline").write_bytes(b"nginx: worker process is shutting down\0")
    assert reload_settled(10, tmp_path)
    assert reload_settled(10, tmp_path / "absent")  # no /proc: nothing to tell


def test_a_master_acts_on_a_reload_only_once_it_forked_a_worker(tmp_path: Path) -> None:
    """Before its first worker the master may take a SIGHUP and never act on it (`master_looping`)."""
    _process(tmp_path, 10, 1, "nginx: master process nginx -c conf")
    _process(tmp_path, 99, 1, "nginx: worker process")  # another master's worker
    assert workers(10, tmp_path) == [] and not master_looping(10, tmp_path)
    _process(tmp_path, 11, 10, "nginx: worker process is shutting down")
    assert workers(10, tmp_path) == [False] and master_looping(10, tmp_path)
    _process(tmp_path, 12, 10, "nginx: worker process")
    assert sorted(workers(10, tmp_path)) == [False, True]
    assert master_looping(10, tmp_path / "absent")  # no /proc: nothing to tell


@pytest.mark.parametrize(
    ("changed", "running", "looping", "action"),
    [
        (True, False, False, "start"),
        (False, False, False, "start"),  # a master that exited is started again
        (False, True, True, "none"),
        (False, True, False, "none"),
        (True, True, True, "reload"),
        (True, True, False, "wait"),  # a master still starting is not signalled
    ],
)
def test_a_sync_starts_reloads_or_waits(changed: bool, running: bool, looping: bool, action: str) -> None:
    assert sync_action(changed=changed, running=running, looping=looping) == action
