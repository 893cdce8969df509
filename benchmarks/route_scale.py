"""Routes at scale: object sizes, the cost of one route change, and routing latency through nginx.

For 10, 1,000, 5,000 and 10,000 routes whose endpoint names have the maximum length (each with a
canary, so every map holds every route), it prints:

- the largest object the route keeper writes (a shard ConfigMap, as the JSON body of its apply)
  and the whole table's size, which a single ConfigMap used to hold;
- one route change: the bytes written (one shard) and the time it takes (the route keeper's merge
  and one apply, over HTTP, against the stand-in API server holding every shard);
- the p50 and p99 latency of a request through the local proxy (Debian's nginx serving the
  rendered nginx.conf and the shards' map files, as `gco.local.region.nginx` runs it) to an upstream
  that answers at once (another nginx), and the same request sent to the upstream directly, so the
  added latency is the proxy's. The four proxies run at once and each round sends one request to
  each, in rotating order, so the machine's noise falls on all of them alike;
- write-to-served at 10 and 10,000 routes with the kubelet's volume delay on (`gco.local.region.volume`,
  EKS's 60 s sync period plus jitter): the local stack's nginx proxy (`NginxProxy`) reads the shards
  from the modelled projected volume, and the time is from the route keeper's refresh with one new
  route to the moment the proxy's status port, asked through the pod proxy as the reconciler asks
  it, answers the route's digest. The keeper annotates the proxy's pod after its write, which makes
  the kubelet sync at once (docs/proxy.md); without it the route would wait for the next periodic
  sync, 60 to 90 s (printed as the model's bound, not waited for).

    .venv/bin/python benchmarks/route_scale.py                 # 20,000 rounds (about a minute)
    .venv/bin/python benchmarks/route_scale.py --rounds 2000   # a quick look (p99s move by 15%)
    .venv/bin/python benchmarks/route_scale.py --served-only   # write-to-served alone (under a minute)

Its last lines are `largest object: N bytes` (target under 1 MiB) and `worst routing p99 ratio
(10,000 vs 10 routes): X` (target at most 1.1): the larger of the p99 ratios over three blocks of
rounds.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gco.endpoints.names import ENDPOINT_NAME_MAX  # noqa: E402
from gco.local.processes.listen import LOOPBACK, free_port  # noqa: E402
from gco.local.region.engines import EngineTable  # noqa: E402
from gco.local.region.kubelet import LocalKubelet  # noqa: E402
from gco.local.region.nginx import NginxProxy, local_conf, nginx_path, self_signed  # noqa: E402
from gco.local.region.services import ServiceNetwork  # noqa: E402
from gco.local.region.volume import KUBELET_SYNC_S, SYNC_JITTER  # noqa: E402
from gco.local.standin import StandInKubeAPI  # noqa: E402
from gco.reconcile.errors import ClusterUnavailableError  # noqa: E402
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token  # noqa: E402
from gco.reconcile.objects import CONFIG_MAP, SYSTEM_NAMESPACE  # noqa: E402
from gco.reconcile.proxy.proxy_conf import nginx_conf  # noqa: E402
from gco.reconcile.proxy.proxy_probe import PodProxyProbe  # noqa: E402
from gco.reconcile.proxy.render_proxy import NGINX_CONF, PROXY_CONFIG  # noqa: E402
from gco.reconcile.proxy.route_changes import RouteChanges  # noqa: E402
from gco.reconcile.proxy.route_keeper import RouteKeeper  # noqa: E402
from gco.reconcile.proxy.route_shards import (  # noqa: E402
    route_digest,
    shard_config_map,
    shard_data,
    shard_of,
    split,
)
from gco.reconcile.proxy.route_store import ConfigMapRouteStore  # noqa: E402
from gco.reconcile.proxy.routes import Route, RouteTable  # noqa: E402

SIZES = (10, 1_000, 5_000, 10_000)
SERVED_SIZES = (10, 10_000)
SERVED_REPEATS = 3
SERVED_TIMEOUT_S = 60.0  # under the modelled sync period: a route served in time was not the periodic sync
BLOCKS = 3
HOST = re.compile(r"[a-z0-9-]+\.gco-inference\.svc\.cluster\.local:8000")
UPSTREAM_CONF = """\
worker_processes 1;
pid {run}/nginx.pid;
error_log {run}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {run}/body;
    proxy_temp_path {run}/proxy;
    fastcgi_temp_path {run}/fastcgi;
    uwsgi_temp_path {run}/uwsgi;
    scgi_temp_path {run}/scgi;
    server {{ listen {host}:{port}; location / {{ return 200 "ok\\n"; }} }}
}}
"""


def name(index: int) -> str:
    return f"r{index:05d}".ljust(ENDPOINT_NAME_MAX, "x")


def route(index: int, service: str | None = None) -> Route:
    """The route of endpoint `index`, to its own Services (or all to `service`)."""
    host = service or name(index)
    return Route(
        endpoint=name(index),
        path=f"/inference/{name(index)}",
        upstream=f"http://{host}.gco-inference.svc:8000",
        canary_upstream=f"http://{host}{'' if service else '--canary'}.gco-inference.svc:8000",
        canary_weight=10,
    )


def routes(count: int, service: str | None = None) -> RouteTable:
    made = [route(index, service) for index in range(count)]
    return RouteTable(routes=tuple(sorted(made, key=lambda route: route.path)))


@dataclass
class Sizes:
    largest: int
    whole: int
    change_bytes: int
    change_ms: float


def sizes(table: RouteTable) -> Sizes:
    """Object sizes, and one route change made by the route keeper against the stand-in."""
    shards = split(table)
    largest = max(len(json.dumps(shard_config_map(shard, part))) for shard, part in shards.items())
    whole = len(json.dumps(table.model_dump(mode="json")))
    with StandInKubeAPI(namespaces=["gco-system"]) as api:
        cluster = KubeCluster(api.url, static_token("t"))
        store = ConfigMapRouteStore(cluster)
        for shard, part in shards.items():
            store.write(shard, part, version=None)
        keeper = RouteKeeper(cluster, store)
        changed = table.routes[len(table.routes) // 2].model_copy(update={"canary_weight": 20})
        changes = RouteChanges()
        changes.put(changed.endpoint, changed)
        patched = api.requests["PATCH"]
        started = time.perf_counter()
        keeper.refresh(changes)
        elapsed = time.perf_counter() - started
        assert api.requests["PATCH"] - patched == 1  # one shard written
        touched = shard_of(changed.endpoint)
        before = shards[touched].routes
        after = RouteTable(routes=tuple(changed if r.endpoint == changed.endpoint else r for r in before))
        written = shard_config_map(touched, after)
        cluster.close()
    return Sizes(largest, whole, len(json.dumps(written)), elapsed * 1000)


class Nginx:
    """One nginx process on `conf`, stopped with `stop`."""

    def __init__(self, program: str, run: Path, conf: str) -> None:
        self.run = run
        (run / "nginx.conf").write_text(conf, encoding="utf-8")
        argv = [program, "-p", f"{run}/", "-c", str(run / "nginx.conf"), "-e", str(run / "error.log")]
        check = subprocess.run([*argv, "-t"], capture_output=True, text=True, check=False)
        if check.returncode != 0:
            raise SystemExit(f"nginx -t: {check.stderr[-400:]}")
        self.process = subprocess.Popen([*argv, "-g", "daemon off;"])

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def proxy(program: str, run: Path, table: RouteTable, upstream: str, tls: Path) -> tuple[Nginx, str]:
    """The local proxy of `table`: the rendered nginx.conf and the shards' map files, adapted."""
    (run / "routes").mkdir(parents=True)
    port, status = free_port(), free_port()
    for shard, part in split(table).items():
        for key, text in shard_data(shard, part).items():
            if key.endswith(".map"):
                (run / "routes" / key).write_text(HOST.sub(upstream, text), encoding="utf-8")
    conf = local_conf(nginx_conf(), {}, port=port, tls_dir=tls, run_dir=run, status_port=status)
    conf = conf.replace("    access_log /dev/stdout;", "    access_log off;")
    return Nginx(program, run, conf), f"https://{LOOPBACK}:{port}"


def wait_ready(client: httpx.Client, url: str) -> None:
    for _ in range(200):
        try:
            client.get(url)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise SystemExit(f"{url} did not answer")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latencies(program: str, rounds: int, tls_dir: Path, work: Path) -> dict[str, list[list[float]]]:
    """Per target (`direct`, or a route count), per block, the seconds of each request."""
    upstream_port = free_port()
    upstream_run = work / "upstream"
    upstream_run.mkdir()
    upstream_conf = UPSTREAM_CONF.format(run=upstream_run, host=LOOPBACK, port=upstream_port)
    started = [Nginx(program, upstream_run, upstream_conf)]
    upstream = f"{LOOPBACK}:{upstream_port}"
    targets: dict[str, tuple[str, list[str]]] = {"direct": (f"http://{upstream}", ["/"])}
    try:
        for count in SIZES:
            table = routes(count)
            process, url = proxy(program, work / f"proxy-{count}", table, upstream, tls_dir)
            started.append(process)
            paths = [f"/inference/{route.endpoint}/v1/x" for route in table.routes]
            targets[str(count)] = (url, paths)
        found: dict[str, list[list[float]]] = {key: [[] for _ in range(BLOCKS)] for key in targets}
        with httpx.Client(verify=str(tls_dir / "tls.crt"), timeout=10) as client:
            for base, paths in targets.values():
                wait_ready(client, base + paths[0])
            keys = list(targets)
            for index in range(rounds):
                block = index * BLOCKS // rounds
                for offset in range(len(keys)):
                    key = keys[(index + offset) % len(keys)]
                    base, paths = targets[key]
                    path = paths[(index * 7919) % len(paths)]
                    started_at = time.perf_counter()
                    answer = client.get(base + path)
                    found[key][block].append(time.perf_counter() - started_at)
                    if answer.status_code != 200:
                        raise SystemExit(f"{key}: {path}: HTTP {answer.status_code}")
        return found
    finally:
        for process in started:
            process.stop()


def write_to_served(count: int, work: Path, tls: Path) -> list[float]:
    """Seconds from the keeper's refresh with one new route to the local nginx proxy serving it,
    `SERVED_REPEATS` times, with `count` routes stored and the kubelet's volume delay on.

    Every route's upstream is one Service (the local Service network starts a listener per Service:
    10,000 would measure threads, not routes); the maps still hold `count` names.
    """
    table = routes(count, service="bench")
    with StandInKubeAPI(namespaces=["gco-system"]) as api:
        cluster = KubeCluster(api.url, static_token("t"))
        store = ConfigMapRouteStore(cluster)
        for shard, part in split(table).items():
            store.write(shard, part, version=None)
        conf = {"apiVersion": "v1", "kind": "ConfigMap", "data": {NGINX_CONF: nginx_conf()}}
        conf["metadata"] = {"name": PROXY_CONFIG, "namespace": SYSTEM_NAMESPACE}
        api.apply_as("bench", conf)
        assert api.get(CONFIG_MAP, SYSTEM_NAMESPACE, PROXY_CONFIG) is not None
        kubelet = LocalKubelet(api, EngineTable.fake(), work / f"kubelet-{count}")
        services = ServiceNetwork(api, kubelet)
        nginx = NginxProxy(
            api, services, work / f"served-{count}", tls_dir=tls, kubelet_sync_s=KUBELET_SYNC_S
        ).start(0.05)
        asker = KubeCluster(api.url, static_token("t"), retry=RetryPolicy(attempts=1))  # no backoff
        probe = PodProxyProbe(asker)
        keeper = RouteKeeper(cluster, store, probe)
        found: list[float] = []
        try:
            served_within(probe, table.routes[0], SERVED_TIMEOUT_S)  # the proxy started on the shards
            for repeat in range(SERVED_REPEATS):
                added = route(count + repeat, service="bench")
                changes = RouteChanges()
                changes.put(added.endpoint, added)
                started = time.perf_counter()
                keeper.refresh(changes)
                served_within(probe, added, SERVED_TIMEOUT_S)
                found.append(time.perf_counter() - started)
        finally:
            nginx.stop()
            services.stop()
            asker.close()
            cluster.close()
    return found


def served_within(probe: PodProxyProbe, served: Route, timeout: float) -> None:
    """Ask the proxy, as the reconciler does, until it serves `served`; exits past `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if probe.unserved(served.endpoint, route_digest(served)) is None:
                return
        except ClusterUnavailableError:  # nginx starting (its status answers 503 until it runs)
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"{served.endpoint}: not served within {timeout:.0f} s")
        time.sleep(0.01)


def print_served(work: Path, tls: Path) -> None:
    bound = f"{KUBELET_SYNC_S:.0f}-{KUBELET_SYNC_S * (1 + SYNC_JITTER):.0f} s"
    print(f"write-to-served, kubelet volume delay on (sync period {bound}), {SERVED_REPEATS} new routes each")
    print("routes  median ms  max ms  without the pod annotation")
    for count in SERVED_SIZES:
        found = write_to_served(count, work, tls)
        print(
            f"{count:>6}  {statistics.median(found) * 1000:>9.0f}  {max(found) * 1000:>6.0f}"
            f"  the next periodic sync: up to {bound}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=20000, help="requests per target (default 20000)")
    parser.add_argument("--served-only", action="store_true", help="write-to-served alone")
    args = parser.parse_args()
    program = nginx_path()
    if program is None:
        raise SystemExit("nginx is not installed (Debian: apt-get install -y nginx)")
    if args.served_only:
        with tempfile.TemporaryDirectory(prefix="gco-route-served-") as tmp:
            self_signed(Path(tmp) / "tls")
            print_served(Path(tmp), Path(tmp) / "tls")
        return
    largest = 0
    print("routes  largest object  whole table  change bytes  change ms")
    for count in SIZES:
        measured = sizes(routes(count))
        largest = max(largest, measured.largest)
        print(
            f"{count:>6}  {measured.largest:>14,}  {measured.whole:>11,}  "
            f"{measured.change_bytes:>12,}  {measured.change_ms:>9.1f}"
        )
    with tempfile.TemporaryDirectory(prefix="gco-route-scale-") as tmp:
        work = Path(tmp)
        tls = work / "tls"
        self_signed(tls)
        found = latencies(program, args.rounds, tls, work)
        print_served(work, tls)
    print("target  p50 ms  p99 ms  added p99 ms")
    direct = [value for block in found["direct"] for value in block]
    for key, blocks in found.items():
        values = [value for block in blocks for value in block]
        added = percentile(values, 0.99) - percentile(direct, 0.99)
        print(
            f"{key:>6}  {statistics.median(values) * 1000:>6.3f}  {percentile(values, 0.99) * 1000:>6.3f}"
            f"  {added * 1000:>12.3f}"
        )
    ratios = [
        percentile(found[str(SIZES[-1])][block], 0.99) / percentile(found[str(SIZES[0])][block], 0.99)
        for block in range(BLOCKS)
    ]
    print(f"p99 ratio per block (10,000 vs 10 routes): {', '.join(f'{ratio:.3f}' for ratio in ratios)}")
    print(f"largest object: {largest} bytes")
    print(f"worst routing p99 ratio (10,000 vs 10 routes): {max(ratios):.3f}")


if __name__ == "__main__":
    main()
