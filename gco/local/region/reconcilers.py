"""The reconcilers of the embedded local stack: per Region a stand-in API server, a reconciler and
a stream poller over the moto server's table stream, plus the sweep.

`pump()` drives everything deterministically (tests, the demo); `start()` runs the pollers and
the sweep on background threads until `stop()`. Each Region's sweep thread writes its heartbeat to
the moto server's SSM of that Region, as the sweep Lambda does in AWS (`gco.reconcile.heartbeat`).

With `app` (the synthesized app: `gco.local.assembly.deployed.DeployedApp`), each Region runs its
Regional stack's functions from their assets instead (`gco.local.assembly.regional`): the poller is
the stack's stream mapping (batch size, batching window, parallelization, retries, bisecting, record
age, filters, on-failure queue) invoking the stream function under its role, the sweep is the
function its schedule targets at the schedule's rate, and the stand-in API server authenticates their
EKS tokens through the stack's access entries. The in-process reconciler of each Region is then only
read (`LocalRegion.reconciler`: the demo's summaries); nothing of the source tree reconciles.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from gco import aws
from gco.endpoints.store import EndpointStore
from gco.local.assembly.deployed import DeployedApp
from gco.local.assembly.regional import RegionalFunctions, RegionalStack
from gco.local.assembly.rollouts import RolloutWing, start_rollouts
from gco.local.assembly.template import UNTIL_EXPIRED
from gco.local.errors import AssemblyError
from gco.local.region.discarded import sqs_destination
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


def _sweep_function(functions: RegionalFunctions) -> bool:
    """One scheduled invocation of the Region's deployed sweep; the next after the schedule's rate."""
    functions.sweep_once()
    return False


@dataclass
class LocalRegion:
    region: str
    api: StandInKubeAPI
    cluster: KubeCluster
    reconciler: Reconciler
    poller: StreamPoller
    functions: RegionalFunctions | None = None

    def handle(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        if self.functions is not None:
            return self.functions.stream_handler(event, context)
        return handle_stream_event(event, self.reconciler, context)


def retries_of(attempts: int) -> int:
    """The poller's attempts of a failing record for the mapping's `MaximumRetryAttempts` (N retries:
    N + 1 attempts; -1, until the record is too old or expires: the poller's -1, no limit)."""
    return -1 if attempts == UNTIL_EXPIRED else attempts + 1


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
        app: DeployedApp | None = None,
    ) -> None:
        self.store = store
        self.app = app
        self.endpoint_url = endpoint_url
        table = store.client.describe_table(TableName=store.table_name)["Table"]
        self.stream_arn: str = table["LatestStreamArn"]
        # The stream lives with the table, in the store's (home) Region.
        home = self.home = store.client.meta.region_name
        self.streams = aws.client("dynamodbstreams", region=home, endpoint_url=endpoint_url)
        # Endpoints' `secret_env` values from the moto server's Secrets Manager, as the Regional
        # reconcilers read them from the home Region's (gco.secrets.endpoint_secrets).
        secrets = SecretsManagerReader(
            lambda name: aws.client("secretsmanager", region=name, endpoint_url=endpoint_url), home
        )
        self.regions: dict[str, LocalRegion] = {}
        backoff = retry or RetryPolicy(attempts=6, base_delay=0.01, max_delay=0.1)
        for region in regions:
            regional = RegionalStack(app, region) if app is not None else None
            api = StandInKubeAPI(
                token=LOCAL_TOKEN,
                identities={RUNNER_TOKEN: RUNNER_IDENTITY},
                ready_delay=ready_delay,
                deletion_delay=deletion_delay,
                authenticator=regional.tokens if regional is not None else None,
            ).start()
            cluster = KubeCluster(api.url, static_token(LOCAL_TOKEN), timeout=client_timeout, retry=backoff)
            # With a proxy (the local stack's), `running` waits for it to serve the route, asked
            # through the stand-in's pod proxy as in EKS; without one, a stored route is served.
            probe = PodProxyProbe(cluster) if probe_proxy else None
            reconciler = Reconciler(
                store, cluster, region, secrets=secrets, probe=probe, wait=wait, poll=poll
            )
            if regional is None:
                reconciler.ensure_system()  # on start: the Region's namespaces and shared proxy
                local = LocalRegion(region, api, cluster, reconciler, self._poller(region))
            else:  # the deployed sweep ensures them (`_first_sweeps`)
                functions = regional.start(api.url)
                local = LocalRegion(region, api, cluster, reconciler, self._mapping(functions), functions)
            local.poller.handler = local.handle
            self.regions[region] = local
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.rollouts: RolloutWing | None = None
        self.rollout_poller: StreamPoller | None = None
        try:
            self._first_sweeps()
        except BaseException:
            self.stop()
            raise

    def add_rollouts(self, evidence_bucket: str, ca_bundle: str | None) -> RolloutWing:
        """Run the app's rollout wing too (`gco.local.assembly.rollouts`): its starter fed by its own
        stream mapping, the rollout state machine on a Step Functions stand-in. With `app` only, once,
        before `start`.

        Raises:
            AssemblyError: no `app`, or its global stack cannot be run.
        """
        if self.app is None:
            raise AssemblyError(
                "the rollout wing runs from the synthesized app: give LocalReconcilers an app"
            )
        wing = start_rollouts(
            self.app,
            self.home,
            table=self.store.table_name,
            stream_arn=self.stream_arn,
            bucket=evidence_bucket,
            ca_bundle=ca_bundle,
        )
        mapping = wing.mapping
        self.rollout_poller = StreamPoller(
            wing.starter.client("dynamodbstreams", self.home),
            self.stream_arn,
            wing.starter_handler,
            region=self.home,
            batch_size=mapping.batch_size,
            parallelization=mapping.parallelization_factor,
            max_retries=retries_of(mapping.retry_attempts),
            filters=mapping.filters,
            batching_window_s=mapping.batching_window_s,
            bisect_on_error=mapping.bisect_on_error,
            maximum_record_age_s=mapping.maximum_record_age_s,
            function_arn=wing.starter.arn,
        )
        self.rollouts = wing
        return wing

    def _pollers(self) -> list[StreamPoller]:
        regional = [local.poller for local in self.regions.values()]
        return regional + ([self.rollout_poller] if self.rollout_poller is not None else [])

    def _first_sweeps(self) -> None:
        """Each Region's deployed sweep once, all at once, before anything else runs: it makes the
        Region's namespaces and shared proxy, as `ensure_system` does for the source tree's reconciler
        (in AWS, the first scheduled sweep after the deploy does)."""
        deployed = [local.functions for local in self.regions.values() if local.functions is not None]
        if deployed:
            with ThreadPoolExecutor(max_workers=len(deployed), thread_name_prefix="first-sweep") as pool:
                list(pool.map(lambda functions: functions.sweep_once(), deployed))

    def _poller(self, region: str) -> StreamPoller:
        """The Region's poller as the stacks configure the stream mapping (`STREAM_SETTINGS`)."""
        return StreamPoller(
            self.streams,
            self.stream_arn,
            self._noop,
            region=region,
            batch_size=STREAM_SETTINGS.batch_size,
            parallelization=STREAM_SETTINGS.parallelization_factor,
        )

    def _mapping(self, functions: RegionalFunctions) -> StreamPoller:
        """The Region's poller as its synthesized mapping says, reading the stream with the stream
        function's role (Lambda's pollers read it with the function's execution role)."""
        mapping = functions.stack.mapping
        destination = functions.on_failure()
        return StreamPoller(
            functions.stream.client("dynamodbstreams", self.home),  # the stream lives with the table
            self.stream_arn,
            self._noop,
            region=functions.stack.region,
            batch_size=mapping.batch_size,
            parallelization=mapping.parallelization_factor,
            max_retries=retries_of(mapping.retry_attempts),
            batching_window_s=mapping.batching_window_s,
            bisect_on_error=mapping.bisect_on_error,
            maximum_record_age_s=mapping.maximum_record_age_s,
            filters=mapping.filters,
            on_failure=sqs_destination(*destination) if destination is not None else None,
            function_arn=functions.stream.arn,
        )

    @staticmethod
    def _noop(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"batchItemFailures": []}

    def pump(self, max_rounds: int = 50) -> int:
        """Deliver stream records to every Region until none is left (bounded); returns records handled."""
        total = 0
        for _ in range(max_rounds):
            handled = sum(poller.poll_once() for poller in self._pollers())
            total += handled
            if handled == 0:
                break
        return total

    def sweep(self) -> dict[str, SweepReport]:
        """One sweep of every Region in this process (with `app`, each Region's deployed sweep is
        invoked instead and the reports are those of its in-process reconciler's read-only view: none)."""
        if self.app is not None:
            for local in self.regions.values():
                if local.functions is not None:
                    local.functions.sweep_once()
            return {}
        return {region: sweep(local.reconciler) for region, local in self.regions.items()}

    def start(self, *, poll_interval: float = 0.2, sweep_interval: float = 15.0) -> LocalReconcilers:
        """Run every Region's poller, and the sweep, on background threads.

        Each poller runs its lanes (`StreamPoller.run`): a lane whose batch returned takes its next
        at once, as Lambda's pollers do while a shard has records; a poller waits `poll_interval`
        only when nothing is in flight and a read found nothing.
        """
        if self.rollout_poller is not None:
            self._threads.append(self._run_poller(self.rollout_poller, "poller-rollouts", poll_interval))
        for local in self.regions.values():
            self._threads.append(self._run_poller(local.poller, f"poller-{local.region}", poll_interval))
            if local.functions is not None:
                # The deployed sweep, at most `sweep_interval` apart: at its schedule's rate (5 minutes)
                # an endpoint whose replicas became ready after its last status echo is seen running
                # only by the next sweep, as in AWS; locally that wait would hold every walk-through.
                rate = local.functions.stack.schedule.every_s or sweep_interval
                every = min(rate, sweep_interval)
                work = partial(_sweep_function, local.functions)
                self._threads.append(self._spawn(f"sweep-{local.region}", work, every))
                continue
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

    def _run_poller(self, poller: StreamPoller, name: str, poll_interval: float) -> threading.Thread:
        thread = threading.Thread(target=poller.run, args=(self._stop, poll_interval), name=name, daemon=True)
        thread.start()
        return thread

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
        if self.rollout_poller is not None:
            self.rollout_poller.close()
        if self.rollouts is not None:
            self.rollouts.close()
        for local in self.regions.values():
            local.poller.close()
            if local.functions is not None:
                local.functions.close()
            local.cluster.close()
            local.api.stop()

    def __enter__(self) -> LocalReconcilers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
