"""The reconcilers of the embedded local stack: per Region a stand-in API server, a reconciler and
a stream poller over the moto server's table stream, plus the sweep.

`pump()` drives everything deterministically (tests, the demo); `start()` runs the pollers and
the sweep on background threads until `stop()`. Each Region's sweep thread writes its heartbeat to
the moto server's SSM of that Region, as the sweep Lambda does in AWS (`gco.reconcile.heartbeat`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from gco import aws
from gco.endpoints.store import EndpointStore
from gco.local.region.poller import StreamPoller
from gco.local.standin import RUNNER_IDENTITY, StandInKubeAPI
from gco.reconcile.expiry import destroy_expired
from gco.reconcile.handler import handle_stream_event
from gco.reconcile.heartbeat import HeartbeatWriter, SsmParameters
from gco.reconcile.kube_tokens import LOCAL_TOKEN, RUNNER_TOKEN
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
from gco.reconcile.proxy.proxy_probe import PodProxyProbe
from gco.reconcile.reconciler import Reconciler
from gco.reconcile.sweep import SweepReport, sweep
from gco.reconcile.throughput import STREAM_SETTINGS
from gco.secrets.secrets_manager import SecretsManagerReader

log = logging.getLogger(__name__)


def _sweep_then_wait(reconciler: Reconciler, heartbeat: HeartbeatWriter) -> bool:
    """One sweep with its heartbeat and the cleanup of expired matrix endpoints, as the sweep Lambda
    does (lambdas/sweep.py); the next waits for the sweep interval, whatever this one found."""
    sweep(reconciler, heartbeat=heartbeat)
    destroy_expired(reconciler.store, region=reconciler.region, now=time.time())
    return False


@dataclass
class LocalRegion:
    region: str
    api: StandInKubeAPI
    cluster: KubeCluster
    reconciler: Reconciler
    poller: StreamPoller

    def handle(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        return handle_stream_event(event, self.reconciler, context)


class LocalReconcilers:
    """Reconcilers for `regions` over `store`'s table stream on a local (moto) endpoint.

    Parameters:
        ready_delay: the stand-ins' readiness delay (seconds).
        wait: how long one reconcile call waits for readiness before requeueing.
        retry: the cluster clients' backoff (short by default: loopback).
    """

    def __init__(
        self,
        store: EndpointStore,
        regions: Iterable[str],
        *,
        endpoint_url: str | None = None,
        ready_delay: float = 0.0,
        deletion_delay: float = 0.0,
        wait: float = 2.0,
        poll: float = 0.05,
        client_timeout: float = 2.0,
        retry: RetryPolicy | None = None,
        probe_proxy: bool = False,
    ) -> None:
        self.store = store
        self.endpoint_url = endpoint_url
        table = store.client.describe_table(TableName=store.table_name)["Table"]
        self.stream_arn: str = table["LatestStreamArn"]
        # The stream lives with the table, in the store's (home) Region.
        home = store.client.meta.region_name
        self.streams = aws.client("dynamodbstreams", region=home, endpoint_url=endpoint_url)
        # Endpoints' `secret_env` values from the moto server's Secrets Manager, as the Regional
        # reconcilers read them from the home Region's (gco.secrets.endpoint_secrets).
        secrets = SecretsManagerReader(
            lambda name: aws.client("secretsmanager", region=name, endpoint_url=endpoint_url), home
        )
        self.regions: dict[str, LocalRegion] = {}
        backoff = retry or RetryPolicy(attempts=6, base_delay=0.01, max_delay=0.1)
        for region in regions:
            api = StandInKubeAPI(
                token=LOCAL_TOKEN,
                identities={RUNNER_TOKEN: RUNNER_IDENTITY},
                ready_delay=ready_delay,
                deletion_delay=deletion_delay,
            ).start()
            cluster = KubeCluster(api.url, static_token(LOCAL_TOKEN), timeout=client_timeout, retry=backoff)
            # With a proxy (the local stack's), `running` waits for it to serve the route, asked
            # through the stand-in's pod proxy as in EKS; without one, a stored route is served.
            probe = PodProxyProbe(cluster) if probe_proxy else None
            reconciler = Reconciler(
                store, cluster, region, secrets=secrets, probe=probe, wait=wait, poll=poll
            )
            reconciler.ensure_system()  # on start: the Region's namespaces and shared proxy
            local = LocalRegion(
                region,
                api,
                cluster,
                reconciler,
                StreamPoller(
                    self.streams,
                    self.stream_arn,
                    self._noop,
                    region=region,
                    batch_size=STREAM_SETTINGS.batch_size,
                    parallelization=STREAM_SETTINGS.parallelization_factor,
                ),
            )
            local.poller.handler = local.handle
            self.regions[region] = local
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @staticmethod
    def _noop(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"batchItemFailures": []}

    def pump(self, max_rounds: int = 50) -> int:
        """Deliver stream records to every Region until none is left (bounded); returns records handled."""
        total = 0
        for _ in range(max_rounds):
            handled = sum(local.poller.poll_once() for local in self.regions.values())
            total += handled
            if handled == 0:
                break
        return total

    def sweep(self) -> dict[str, SweepReport]:
        return {region: sweep(local.reconciler) for region, local in self.regions.items()}

    def start(self, *, poll_interval: float = 0.2, sweep_interval: float = 15.0) -> LocalReconcilers:
        """Run every Region's poller, and the sweep, on background threads.

        Each poller runs its lanes (`StreamPoller.run`): a lane whose batch returned takes its next
        at once, as Lambda's pollers do while a shard has records; a poller waits `poll_interval`
        only when nothing is in flight and a read found nothing.
        """
        for local in self.regions.values():
            poller = threading.Thread(
                target=local.poller.run,
                args=(self._stop, poll_interval),
                name=f"poller-{local.region}",
                daemon=True,
            )
            poller.start()
            self._threads.append(poller)
            ssm = aws.client("ssm", region=local.region, endpoint_url=self.endpoint_url)
            heartbeat = HeartbeatWriter(SsmParameters(ssm), self.store.table_name, sweep_interval)
            self._threads.append(
                self._spawn(
                    f"sweep-{local.region}",
                    partial(_sweep_then_wait, local.reconciler, heartbeat),
                    sweep_interval,
                )
            )
        return self

    def _spawn(self, name: str, work: Callable[[], bool], interval: float) -> threading.Thread:
        """Run `work` until stopped; it answers whether to run again at once rather than after `interval`."""

        def loop() -> None:
            while not self._stop.is_set():
                again = False
                try:
                    again = work()
                except Exception:  # keep the local stack alive; the next round retries
                    log.exception("%s failed", name)
                if not again:
                    self._stop.wait(interval)

        thread = threading.Thread(target=loop, name=name, daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads.clear()
        for local in self.regions.values():
            local.poller.close()
            local.cluster.close()
            local.api.stop()

    def __enter__(self) -> LocalReconcilers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
