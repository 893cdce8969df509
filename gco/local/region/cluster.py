"""The local clusters: per Region the stand-in API server and reconciler (`LocalReconcilers`),
the engines behind it (`LocalKubelet`), its autoscaler (`LocalAutoscaler`), the Service network
and the Region's proxy (nginx, `NginxProxy`, or the in-process `LocalRouter`).

What `gco local up` runs in its background process and what the functional tests drive; the
reconcilers come from `gco.local.region.reconcilers`, the stand-in API server from `gco.local.standin`;
everything that stands in for the cluster lives in `gco/local/`, outside the package shipped to
Lambda.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal, Protocol

from gco.endpoints.store import EndpointStore
from gco.front_door import regional_stack_name
from gco.local.assembly.deployed import DeployedApp
from gco.local.assembly.rollouts import regional_outputs_stack
from gco.local.region.autoscaler import LocalAutoscaler
from gco.local.region.engines import EngineTable
from gco.local.region.kubelet import LocalKubelet, RestartPolicy
from gco.local.region.nginx import NginxProxy, nginx_path
from gco.local.region.reconcilers import LocalReconcilers
from gco.local.region.router import LocalRouter
from gco.local.region.services import ServiceNetwork
from gco.local.region.volume import KUBELET_SYNC_S

ProxyKind = Literal["auto", "nginx", "python"]


class RegionProxy(Protocol):
    """The Region's way in: `<url>/inference/<name>/...`."""

    url: str

    def stop(self) -> None: ...


class LocalClusters:
    """Reconcilers, engines and routes for `regions`; a context manager.

    Parameters:
        store: the endpoint store on the local (moto) endpoint.
        log_dir: where each engine process writes its log.
        table: the engine table (default: the fake engine for every framework).
        proxy: `nginx` (the rendered configuration served by Debian's nginx, over TLS), `python`
            (the in-process router, plain HTTP), or `auto` (nginx where it is installed).
        tls_dir: the proxies' certificate (made there once; default `<log_dir>/tls`).
        restart: the kubelets' restart back-off of an engine that exited (the kubelet's by default).
        clock: the kubelets' clock, seconds, monotonic (a test's own, to hold a back-off).
        kubelet_sync_s: the proxy pod's kubelet sync period, after which at the latest a changed
            route shard reaches the proxy (`gco.local.region.volume`; EKS's 1 minute by default; the
            reconciler's pod annotation makes it sooner, as in EKS; 0: at once).
        app: the synthesized app whose Regional functions reconcile (`LocalReconcilers`); None: the
            reconciler of the source tree, in this process. With `app`, each Region's Regional stack
            outputs its proxy as `InvokeUrl` in the moto server (`regional_outputs_stack`), and where
            the home Region is among `regions` and `evidence_bucket` is given, the app's rollout wing
            runs too (`LocalReconcilers.add_rollouts`).
        evidence_bucket: the bucket the rollout functions write evidence to.
    """

    def __init__(
        self,
        store: EndpointStore,
        regions: Iterable[str],
        *,
        endpoint_url: str | None,
        log_dir: Path,
        table: EngineTable | None = None,
        wait: float = 2.0,
        poll: float = 0.05,
        proxy: ProxyKind = "auto",
        tls_dir: Path | None = None,
        restart: RestartPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        kubelet_sync_s: float = KUBELET_SYNC_S,
        app: DeployedApp | None = None,
        evidence_bucket: str | None = None,
    ) -> None:
        self.reconcilers = LocalReconcilers(
            store, regions, endpoint_url=endpoint_url, wait=wait, poll=poll, probe_proxy=True, app=app
        )
        self.kubelets: dict[str, LocalKubelet] = {}
        self.proxies: dict[str, RegionProxy] = {}
        self.services: dict[str, ServiceNetwork] = {}
        self.autoscalers: dict[str, LocalAutoscaler] = {}
        self.nginx = proxy == "nginx" or (proxy == "auto" and nginx_path() is not None)
        self.ca_bundle: Path | None = None
        self._sync_interval = 0.2
        engines = table or EngineTable.fake()
        for region, local in self.reconcilers.regions.items():
            kubelet = LocalKubelet(local.api, engines, log_dir / region, restart=restart, clock=clock)
            self.kubelets[region] = kubelet
            self.autoscalers[region] = LocalAutoscaler(local.api, kubelet)
            network = self.services[region] = ServiceNetwork(local.api, kubelet)
            if self.nginx:
                nginx = NginxProxy(
                    local.api,
                    network,
                    log_dir / region / "nginx",
                    tls_dir=tls_dir or log_dir / "tls",
                    kubelet_sync_s=kubelet_sync_s,
                )
                self.ca_bundle = nginx.ca_bundle
                self.proxies[region] = nginx
            else:
                self.proxies[region] = LocalRouter(local.api, network, kubelet_sync_s=kubelet_sync_s)
        if app is not None:
            self._deploy_outputs(app, evidence_bucket)

    def _deploy_outputs(self, app: DeployedApp, evidence_bucket: str | None) -> None:
        """Each Region's stack output, and the rollout wing where this process has the home Region."""
        for region, url in self.invoke_urls().items():
            regional_outputs_stack(app.client("cloudformation", region), regional_stack_name(region), url)
        if evidence_bucket is not None and self.reconcilers.home in self.reconcilers.regions:
            bundle = str(self.ca_bundle) if self.ca_bundle is not None else None
            self.reconcilers.add_rollouts(evidence_bucket, bundle)

    def invoke_urls(self) -> dict[str, str]:
        """Per Region the base that `<base>/<name>/...` invokes (as the Regional stack's InvokeUrl)."""
        return {region: f"{router.url}/inference" for region, router in self.proxies.items()}

    def fail_proxy(self, region: str) -> None:
        """Stop `region`'s proxy (its port refuses connections) until `restore_proxy`."""
        self.proxies[region].stop()

    def restore_proxy(self, region: str) -> None:
        """Serve `region`'s proxy again, on the port it had."""
        proxy = self.proxies[region]
        if isinstance(proxy, NginxProxy):
            proxy.start(self._sync_interval)
        else:
            port = int(proxy.url.rsplit(":", 1)[1])
            local = self.reconcilers.regions[region]
            self.proxies[region] = LocalRouter(local.api, self.services[region], port=port)

    def fail_readiness(self, region: str, endpoints: Iterable[str], failing: bool = True) -> None:
        """Make the readiness probes of `endpoints`' replicas in `region` fail (or pass again)."""
        self.kubelets[region].fail_probes(set(endpoints), failing)

    def start(
        self,
        *,
        sync_interval: float = 0.2,
        poll_interval: float = 0.2,
        sweep_interval: float = 5.0,
        engines: bool = True,
    ) -> LocalClusters:
        """Engines (unless `engines` is False: the caller syncs them), stream pollers and sweeps on
        background threads."""
        self._sync_interval = sync_interval
        for kubelet in self.kubelets.values() if engines else ():
            kubelet.start(sync_interval)
        for autoscaler in self.autoscalers.values():
            autoscaler.start(sync_interval)
        for proxy in self.proxies.values():
            if isinstance(proxy, NginxProxy):
                proxy.start(sync_interval)
        self.reconcilers.start(poll_interval=poll_interval, sweep_interval=sweep_interval)
        return self

    def stop(self) -> None:
        for autoscaler in self.autoscalers.values():
            autoscaler.stop()
        self.reconcilers.stop()
        for proxy in self.proxies.values():
            proxy.stop()
        for network in self.services.values():
            network.stop()
        for kubelet in self.kubelets.values():
            kubelet.stop()

    def __enter__(self) -> LocalClusters:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
