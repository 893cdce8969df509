"""The Region's shared proxy on the local stack: Debian's nginx serving the configuration the
reconciler rendered, adapted to one machine.

The reconciler renders `nginx.conf` into the ConfigMap `inference-proxy-conf` for the
`api-tls-proxy` container, and the route keeper the routes into the route shards' map files
(`route_shards.py`), which the container reads from a projected volume. Here the same files are
served by a real nginx process after a pure, line-for-line local adaptation (`local_conf`):

- each upstream `<service>.<namespace>.svc.cluster.local:<port>` becomes the Service's loopback
  address on the local Service network (there is no cluster DNS), so the `resolver` line goes;
- `listen 8443 ssl` becomes `listen 127.0.0.1:<port> ssl`, with a self-signed certificate made by
  the same `openssl req` the `tls-cert` init container runs (plus a subjectAltName for
  127.0.0.1, so a client can verify it against the certificate itself);
- the pid file and temporary paths move from `/tmp` into the stack's run directory, the routes
  volume to `<run dir>/routes`, the status port to a loopback port, and one worker process serves
  (a development machine, not a node).

Routing (the maps, the canary splits, the prefix rewrite), `/healthz`, 404 and the status port stay
as rendered. `NginxProxy.sync()` writes the files whose rendered content or Service addresses
changed, checks the whole with `nginx -t`, and reloads (SIGHUP) the running master, as the
deployed pod's reloader does when the kubelet updates the volume; a master that died is started
again, and one still starting is left to the next sync (`master_looping`: it could lose the SIGHUP
and serve its first configuration until the next change). It registers itself with the stand-in as
the proxy's Pod, so the reconciler asks its real status port (through the pod proxy) whether it
serves a route before reporting `running`.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import httpx

from gco.local.errors import NginxError
from gco.local.processes.listen import LOOPBACK, free_port
from gco.local.region.loop import SyncLoop
from gco.local.region.router import LOCAL_PROXY_POD, ShardReader, proxy_pod
from gco.local.region.services import ServiceNetwork
from gco.local.region.volume import MountedShards
from gco.local.standin import StandInKubeAPI
from gco.processes.identity import Started
from gco.processes.launch import EngineProcess, clean_env
from gco.reconcile.objects import CONFIG_MAP, SYSTEM_NAMESPACE
from gco.reconcile.proxy.render_proxy import CERT_ARGS, NGINX_CONF, PROXY_CONFIG
from gco.reconcile.proxy.route_shards import MAP_SUFFIXES
from gco.reconcile.proxy.routes import (
    CLUSTER_DOMAIN,
    PROXY_PORT,
    ROUTES_DIR,
    STATUS_PORT,
    TLS_DIR,
    UPSTREAM,
    RouteTable,
)

log = logging.getLogger(__name__)
NGINX = "nginx"
CHECK_TIMEOUT_S = 30.0
PROC = Path("/proc")
STOP_TIMEOUT_S = 5.0


def nginx_path() -> str | None:
    """The nginx program on PATH (or Debian's /usr/sbin), or None where it is not installed."""
    return shutil.which(NGINX) or shutil.which(NGINX, path="/usr/sbin:/usr/local/sbin")


def local_conf(
    rendered: str,
    addresses: Mapping[str, str],
    *,
    port: int,
    tls_dir: Path,
    run_dir: Path,
    status_port: int = 0,
) -> str:
    """The rendered configuration, or a route shard's map file, adapted to loopback (module docstring); pure.

    Parameters:
        addresses: `<service>.<namespace>.svc` -> `127.0.0.1:<port>` of every upstream it names.
    """
    out: list[str] = []
    for original in rendered.splitlines():
        stripped = original.strip()
        if stripped.startswith("resolver "):
            continue
        line = "worker_processes 1;" if stripped.startswith("worker_processes ") else original
        line = line.replace(f"listen {PROXY_PORT} ssl;", f"listen {LOOPBACK}:{port} ssl;")
        line = line.replace(f"listen {STATUS_PORT};", f"listen {LOOPBACK}:{status_port};")
        # /tmp first: the run directory put in below may itself be under /tmp.
        line = line.replace(" /tmp/", f" {run_dir}/").replace(f" {TLS_DIR}/", f" {tls_dir}/")
        line = line.replace(f" {ROUTES_DIR}/", f" {run_dir}/routes/")
        for host, address in addresses.items():
            line = re.sub(rf"\b{re.escape(host)}\.{re.escape(CLUSTER_DOMAIN)}:\d+\b", address, line)
        out.append(line)
    return "\n".join(out) + "\n"


def workers(master: int, proc: Path = PROC) -> list[bool]:
    """For each worker process of nginx's master `master`, whether it still takes new connections
    (False: `nginx: worker process is shutting down`, https://nginx.org/en/docs/control.html).

    Raises:
        FileNotFoundError: there is no /proc to read (not Linux).
    """
    if not proc.is_dir():
        raise FileNotFoundError(proc)
    found: list[bool] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended meanwhile
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == master and title.startswith("nginx: worker process"):
            found.append("shutting down" not in title)
    return found


def reload_settled(master: int, proc: Path = PROC) -> bool:
    """Whether nginx's master `master` has exactly one worker taking new connections.

    On SIGHUP the master reads the configuration, starts new workers, and only then tells the old
    ones to stop accepting (their title becomes `nginx: worker process is shutting down`,
    https://nginx.org/en/docs/control.html). Until then an old worker, with the old routes, may take
    a new connection: a status answer from a new worker would say a route is served while the next
    request can still get the old configuration's 404. One accepting worker (`worker_processes 1`
    here) means the reload, if any, is over. Where there is no /proc to read (not Linux), True.
    """
    try:
        return sum(workers(master, proc)) == 1
    except FileNotFoundError:
        return True


def master_looping(master: int, proc: Path = PROC) -> bool:
    """Whether nginx's master `master` has forked a worker, so that it acts on a SIGHUP.

    nginx installs its signal handlers early in `main` (`ngx_init_signals`), but acts on a reload
    only in its master loop: `ngx_master_process_cycle` (src/os/unix/ngx_process_cycle.c) blocks the
    signals it handles, forks the workers, and then loops on `sigsuspend`, reading the flags the
    handlers set (`ngx_reconfigure`) only after a signal wakes it. A SIGHUP taken between the two
    sets the flag before the loop starts, and the first `sigsuspend` then waits for another signal:
    the reload is lost, and the master serves the configuration it started with until the next
    signal (seen here: nginx 1.22 signalled 2.8 ms after its start kept its old configuration,
    alive). A master with a worker has passed the block: a SIGHUP is either pending or acted upon.
    Where there is no /proc to read (not Linux), True.
    """
    try:
        return bool(workers(master, proc))
    except FileNotFoundError:
        return True


SyncAction = Literal["none", "wait", "start", "reload"]


def sync_action(*, changed: bool, running: bool, looping: bool) -> SyncAction:
    """What a sync does with the files it rendered (`NginxProxy.sync`).

    Parameters:
        changed: the files differ from those nginx was last started or reloaded with.
        running: an nginx master runs (started and not exited).
        looping: that master acts on a SIGHUP (`master_looping`).

    Returns:
        `start` with no master running; else nothing unless the files changed; then `wait` (write
        nothing, the next sync asks again) while the master is still starting, else `reload`.
    """
    if not running:
        return "start"
    if not changed:
        return "none"
    return "reload" if looping else "wait"


def self_signed(tls_dir: Path) -> Path:
    """`tls.key` and `tls.crt` in `tls_dir` (made once); returns the certificate's path."""
    cert = tls_dir / "tls.crt"
    if cert.exists():
        return cert
    tls_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        "openssl",
        *CERT_ARGS,
        "-subj",
        f"/CN={LOOPBACK}",
        "-addext",
        f"subjectAltName=IP:{LOOPBACK}",
        "-keyout",
        str(tls_dir / "tls.key"),
        "-out",
        str(cert),
    ]
    subprocess.run(argv, check=True, capture_output=True, timeout=CHECK_TIMEOUT_S)
    return cert


class NginxProxy:
    """One Region's nginx; `url` is its base (`<url>/inference/<name>/...`), `ca_bundle` its certificate.

    Parameters:
        api: the Region's stand-in (the rendered ConfigMap is read from it).
        services: the Region's Service network (the upstreams' loopback addresses).
        run_dir: configuration, certificate, pid file, temporary files and log.
        port: the port to listen on (0: a free one).
        tls_dir: where the certificate is (made there once; default `<run_dir>/tls`).
        kubelet_sync_s: the modelled kubelet's sync period: the route files change when it syncs
            the proxy's Pod (`gco.local.region.volume`; 0: as soon as the shards are stored).
    """

    def __init__(
        self,
        api: StandInKubeAPI,
        services: ServiceNetwork,
        run_dir: Path,
        *,
        port: int = 0,
        tls_dir: Path | None = None,
        kubelet_sync_s: float = 0.0,
    ) -> None:
        program = nginx_path()
        if program is None:
            raise NginxError("nginx is not installed (Debian: apt-get install -y nginx)")
        self.program = program
        self.api = api
        self.services = services
        self.run_dir = run_dir
        self.port = port or free_port()
        self.url = f"https://{LOOPBACK}:{self.port}"
        run_dir.mkdir(parents=True, exist_ok=True)
        self.tls_dir = tls_dir or run_dir / "tls"
        self.ca_bundle = self_signed(self.tls_dir)
        self.conf_path = run_dir / NGINX_CONF
        self.status_port = free_port()
        self.routes = ShardReader(api, MountedShards(api, LOCAL_PROXY_POD, sync_s=kubelet_sync_s))
        self._files: dict[str, str] = {}
        # ConfigMap (the configuration, each route shard) -> (resourceVersion, its files adapted)
        self._adapted: dict[str, tuple[str, dict[str, str]]] = {}
        self._adapted_with: dict[str, str] = {}  # the addresses `_adapted` was adapted with
        self._addresses_of: tuple[RouteTable, dict[str, str]] | None = None
        self._process: EngineProcess | None = None
        self._lock = threading.Lock()
        self._loop = SyncLoop(self.sync, name="local-nginx")
        api.register_pod(proxy_pod(LOCAL_PROXY_POD, ready=True), self.status)

    def pid(self) -> int | None:
        return self._process.pgid if self._process is not None and not self._process.exited() else None

    def group(self) -> Started | None:
        """The nginx master as started (it leads its group of workers), while it runs."""
        return self._process.started if self._process is not None and not self._process.exited() else None

    def desired_files(self) -> dict[str, str]:
        """Each file nginx reads (relative to the run directory) as adapted now; none before the
        reconciler rendered the proxy.

        The configuration and each shard's files are adapted again only when that ConfigMap's
        resourceVersion or the Services' addresses changed: at 10,000 routes adapting every map file
        takes seconds, and the sync loop asks several times a second; with nothing changing, adapting
        the configuration alone was a quarter of the walk-through's Python time in its own process
        (`py-spy record --gil`, docs/benchmarks.md).
        """
        config = self.api.get(CONFIG_MAP, SYSTEM_NAMESPACE, PROXY_CONFIG)
        rendered = ((config or {}).get("data") or {}).get(NGINX_CONF) or ""
        if config is None or not rendered:
            return {}
        addresses = self._addresses(self.routes.table())
        if addresses != self._adapted_with:
            self._adapted, self._adapted_with = {}, addresses
        adapt = functools.partial(
            local_conf,
            addresses=addresses,
            port=self.port,
            tls_dir=self.tls_dir,
            run_dir=self.run_dir,
            status_port=self.status_port,
        )
        files = dict(self._adapted_files(config, lambda: {NGINX_CONF: rendered}, adapt))
        for shard in self.routes.shards():

            def maps(shard: Mapping[str, Any] = shard) -> dict[str, str]:
                data = (shard.get("data") or {}).items()
                return {f"routes/{key}": text for key, text in data if key.endswith(MAP_SUFFIXES)}

            files.update(self._adapted_files(shard, maps, adapt))
        return files

    def _adapted_files(
        self,
        config_map: Mapping[str, Any],
        texts: Callable[[], Mapping[str, str]],
        adapt: Callable[[str], str],
    ) -> dict[str, str]:
        """A ConfigMap's files (`texts`: path -> its text) adapted, kept until its resourceVersion changes."""
        meta = config_map["metadata"]
        name, version = str(meta["name"]), str(meta.get("resourceVersion"))
        kept = self._adapted.get(name)
        if kept is None or kept[0] != version:
            adapted = {path: adapt(text) if text else "" for path, text in texts().items()}
            kept = self._adapted[name] = (version, adapted)
        return kept[1]

    def _addresses(self, table: RouteTable) -> dict[str, str]:
        """The upstreams' loopback addresses (`local_conf`), looked up again only for a new table."""
        if self._addresses_of is not None and self._addresses_of[0] is table:
            return self._addresses_of[1]
        addresses: dict[str, str] = {}
        for route in table.routes:
            for upstream in (route.upstream, route.canary_upstream):
                match = UPSTREAM.match(upstream or "")
                if match is not None:
                    service, namespace, _ = match["host"].split(".")
                    addresses[match["host"]] = self.services.address(namespace, service)
        self._addresses_of = (table, addresses)
        return addresses

    def _argv(self, *extra: str) -> list[str]:
        return [self.program, "-p", f"{self.run_dir}/", "-c", str(self.conf_path), "-e", "stderr", *extra]

    def sync(self) -> None:
        """Serve the rendered files: write and check them when they changed, then start or reload
        (`sync_action`: a master still starting is not signalled, its reload could be lost).

        Raises:
            NginxError: `nginx -t` refused the configuration (the files are written again, and
                checked, on the next sync).
        """
        with self._lock:
            files = self.desired_files()
            if not files:
                return  # the reconciler has not rendered the proxy yet
            process = self._process
            running = process is not None and not process.exited()
            action = sync_action(
                changed=files != self._files,
                running=running,
                looping=running and process is not None and master_looping(process.popen.pid),
            )
            if action in ("none", "wait"):
                return
            self._write(files)
            check = subprocess.run(
                self._argv("-t"), check=False, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S
            )
            if check.returncode != 0:
                self._files = {}  # written but refused: written again, and checked, next time
                raise NginxError(f"nginx -t refused the configuration: {check.stderr.strip()[-400:]}")
            self._files = files
            if action == "reload" and process is not None:
                process.signal(signal.SIGHUP)  # graceful reload of the master
                return
            if process is not None:
                log.warning("nginx exited (%s); starting it again", process.popen.returncode)
            env = clean_env({}, os.environ).env
            self._process = EngineProcess(self._argv("-g", "daemon off;"), env, self.run_dir / "nginx.log")

    def _write(self, files: Mapping[str, str]) -> None:
        """Write what changed, each file atomically (nginx may read while a file is being replaced)."""
        (self.run_dir / "routes").mkdir(exist_ok=True)
        for name, text in files.items():
            if self._files.get(name) == text:
                continue
            target = self.run_dir / name
            partial = target.with_name(target.name + ".next")
            partial.write_text(text, encoding="utf-8")
            os.replace(partial, target)
        for name in set(self._files) - set(files):
            (self.run_dir / name).unlink(missing_ok=True)

    def status(self, port: int, path: str) -> tuple[int, str]:
        """What this nginx's status port answers (relayed by the stand-in's pod proxy); 503 while a
        reload is under way (`reload_settled`)."""
        if port != STATUS_PORT or self._process is None or self._process.exited():
            return 503, "the proxy is not running\n"
        if not reload_settled(self._process.popen.pid):
            return 503, "the proxy is reloading\n"
        try:
            reply = httpx.get(f"http://{LOOPBACK}:{self.status_port}{path}", timeout=CHECK_TIMEOUT_S)
        except httpx.HTTPError as error:
            return 503, f"{type(error).__name__}\n"
        return reply.status_code, reply.text

    def start(self, interval: float = 0.2) -> NginxProxy:
        self._loop.start(interval)
        return self

    def stop(self) -> None:
        self._loop.stop()
        with self._lock:
            if self._process is not None:
                self._process.stop(STOP_TIMEOUT_S)
                self._process = None
            self._files = {}  # a later `start` writes, checks and starts nginx afresh
