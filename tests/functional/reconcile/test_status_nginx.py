"""The proxy's status port in a real nginx: `GET /shards` answers the version of every route shard
nginx loaded, byte for byte as the local stack's proxy pods answer it (`route_shards.versions_answer`),
and `GET /routes/<name>` the route's digest.

nginx runs the configuration `nginx_conf()` renders, adapted to loopback as the local stack adapts
it (`gco.local.region.nginx.local_conf`), over route shard files written as the kubelet projects
them: one shard with a route, one empty, one written before shards carried versions (no version
file). Skipped where nginx is not installed (`.ci/run` installs it).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gco.local.processes.listen import LOOPBACK, free_port
from gco.local.region.nginx import local_conf, nginx_path, self_signed
from gco.reconcile.proxy.proxy_conf import nginx_conf
from gco.reconcile.proxy.route_shards import (
    SHARDS,
    VERSION_MAP,
    parse_versions,
    route_digest,
    shard_data,
    shard_of,
    shard_version,
    versions_answer,
)
from gco.reconcile.proxy.routes import STATUS_ROUTE_PATH, STATUS_SHARDS_PATH, Route, RouteTable

pytestmark = pytest.mark.skipif(nginx_path() is None, reason="nginx is not installed")

LLAMA = Route(endpoint="llama", path="/inference/llama", upstream="http://llama.gco-inference.svc:8000")
WITH_ROUTE = shard_of(LLAMA.endpoint)
EMPTY = (WITH_ROUTE + 1) % SHARDS
UNVERSIONED = (WITH_ROUTE + 2) % SHARDS
WAIT_S = 10.0


def _write_shard(routes: Path, shard: int, table: RouteTable, *, versioned: bool = True) -> None:
    for key, text in shard_data(shard, table).items():
        if key.endswith(".map") and (versioned or not key.endswith(VERSION_MAP)):
            (routes / key).write_text(text)


@pytest.fixture
def status_url(tmp_path: Path) -> Iterator[str]:
    run = tmp_path / "run"
    routes = run / "routes"
    routes.mkdir(parents=True)
    status_port = free_port()
    conf = local_conf(
        nginx_conf(),
        {},
        port=free_port(),
        tls_dir=tmp_path / "tls",
        run_dir=run,
        status_port=status_port,
    )
    (run / "nginx.conf").write_text(conf)
    _write_shard(routes, WITH_ROUTE, RouteTable(routes=(LLAMA,)))
    _write_shard(routes, EMPTY, RouteTable())
    _write_shard(routes, UNVERSIONED, RouteTable(), versioned=False)
    self_signed(tmp_path / "tls")
    program = nginx_path()
    assert program is not None
    check = subprocess.run(
        [program, "-t", "-c", str(run / "nginx.conf")], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stderr
    process = subprocess.Popen(
        [program, "-c", str(run / "nginx.conf"), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://{LOOPBACK}:{status_port}"
    try:
        for _ in range(200):  # bounded: up to 10 s for nginx to listen
            try:
                httpx.get(f"{url}{STATUS_SHARDS_PATH}", timeout=1.0)
                break
            except httpx.TransportError:
                threading.Event().wait(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_shards_answers_every_loaded_version_as_the_local_pods_do(status_url: str) -> None:
    answer = httpx.get(f"{status_url}{STATUS_SHARDS_PATH}", timeout=WAIT_S)
    expected = {WITH_ROUTE: shard_version(RouteTable(routes=(LLAMA,))), EMPTY: shard_version(RouteTable())}
    assert answer.status_code == 200
    assert answer.text == versions_answer(expected)
    assert parse_versions(answer.text) == expected  # the unversioned shard and the absent ones: none


def test_a_route_s_digest_is_still_answered_by_name(status_url: str) -> None:
    found = httpx.get(f"{status_url}{STATUS_ROUTE_PATH}{LLAMA.endpoint}", timeout=WAIT_S)
    assert (found.status_code, found.text) == (200, route_digest(LLAMA) + "\n")
    assert httpx.get(f"{status_url}{STATUS_ROUTE_PATH}mistral", timeout=WAIT_S).status_code == 404
    assert httpx.get(f"{status_url}/shards/", timeout=WAIT_S).status_code == 404
