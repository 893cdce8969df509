"""The Regional reconciler: key in, fresh strong read, plan, act, observe, write.

Level-triggered and idempotent: whatever triggered it (a stream record, the sweep, a retry), it
reads the record with a strongly consistent read of the home table and the endpoint's objects
from the Region's cluster, and acts on those alone. Outcomes, as in controller-runtime:

- `done`: the Region is as desired (nothing is left to wait for);
- `requeue`: progressing (waiting for readiness or termination): look again after `after` s;
- `terminal`: the API server rejected an object, an object the endpoint renders is held under its
  name by another endpoint, another lifecycle or no gco endpoint (`ObjectOwnedElsewhereError`:
  never applied over, the Region's status names the holder), the cluster does not serve a kind the endpoint
  needs (`ScaledObject needs KEDA in <region>`), the stack says the Region lacks an add-on the
  endpoint's autoscaling needs (`ScaledObject needs keda, prometheus in <region>`), or the
  endpoint's namespace is not one gco is granted; logged and recorded as status `error`, not
  retried until the record changes;
- an exception (`ClusterUnavailableError`, `ClusterAuthError`, `StoreUnavailableError`): retry
  with backoff (the stream redelivers the record; the sweep picks it up in any case).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from gco import endpoint_secrets
from gco.endpoint_secrets import SecretValue
from gco.endpoints.record import EndpointRecord
from gco.endpoints.store import EndpointStore
from gco.reconcile.access import RECONCILER_GRANT, Grant
from gco.reconcile.errors import ClusterRejectedError, KindNotServedError
from gco.reconcile.objects import (
    ENDPOINT_LABEL,
    POD,
    ObjectRef,
    labels_of,
)
from gco.reconcile.ownership import claim
from gco.reconcile.planner import Plan, RouteCheck, plan
from gco.reconcile.port import Cluster
from gco.reconcile.proxy.proxy_probe import ProxyProbe
from gco.reconcile.proxy.route_changes import RouteChanges
from gco.reconcile.proxy.route_keeper import RouteKeeper, is_route_key, note_applied, note_deleted
from gco.reconcile.record_writes import Outcome, RecordWriter, Tally
from gco.reconcile.refusals import refusal
from gco.reconcile.secret_sync import EndpointSecret
from gco.reconcile.settings import DEFAULT_SETTINGS, RenderSettings
from gco.reconcile.system import SystemReport, ensure_system

log = logging.getLogger(__name__)
MAX_APPLIES = 8  # applies of one plan in flight at once (a plan has at most a dozen objects)


def _replace(observed: Sequence[dict[str, Any]], answers: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`observed` with each object the API server answered for replaced by its answer."""
    fresh = {ObjectRef.of(obj).key: obj for obj in answers}
    kept = [obj for obj in observed if ObjectRef.of(obj).key not in fresh]
    return kept + list(fresh.values())


class Reconciler:
    """Reconciles endpoints into one Region's cluster.

    Parameters:
        store: the home Region's table (all reads strongly consistent, all writes fenced).
        cluster: the Region's cluster (the `Cluster` port).
        region: the Region this reconciler serves.
        grant: what the reconciler may touch (its namespaces); the cluster client lists within it.
        secrets: reads the values of endpoints' `secret_env` (Secrets Manager); None: none can be read.
        probe: asks the Region's proxy whether it serves a route (`running` waits for it); None:
            a route is taken as served once stored (a cluster without a proxy to ask).
        wait: seconds one call may wait for readiness/termination before answering `requeue`.
        poll: seconds between observations while waiting.
        max_passes: bound on plan/act/observe passes in one call.
        clock, sleep: injectable time.
    """

    def __init__(
        self,
        store: EndpointStore,
        cluster: Cluster,
        region: str,
        *,
        settings: RenderSettings = DEFAULT_SETTINGS,
        grant: Grant = RECONCILER_GRANT,
        secrets: endpoint_secrets.SecretReader | None = None,
        probe: ProxyProbe | None = None,
        wait: float = 0.0,
        poll: float = 0.5,
        max_passes: int = 50,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.records = RecordWriter(store, region)
        self.cluster = cluster
        self.region = region
        self.settings = settings
        self.grant = grant
        self.secrets = EndpointSecret(cluster, secrets, region)
        self.routes = RouteKeeper(cluster, probe=probe, clock=clock)
        self.system_ready = False
        self.wait = wait
        self.poll = poll
        self.max_passes = max_passes
        self._clock = clock
        self._sleep = sleep

    @property
    def store(self) -> EndpointStore:
        """The home Region's table (every read and write of records goes through `records`)."""
        return self.records.store

    @store.setter
    def store(self, store: EndpointStore) -> None:
        self.records.store = store

    def ensure_system(self, observed: Sequence[dict[str, Any]] | None = None) -> SystemReport:
        """Apply the Region's namespaces and shared proxy where they differ (`system.py`), then have the
        route keeper rebuild the route shards from every route Ingress.

        The full check, on start and in the sweep: it heals any drift of the shards from the routes.
        `observed` (the sweep's snapshot) is not used for the routes: the keeper lists them after it
        read the shards, so that a shard written meanwhile is never overwritten with an older list.
        """
        report = ensure_system(self.cluster, self.settings, self.grant)
        self.system_ready = True
        report.applied += self.routes.rebuild().applied
        if report.applied:
            log.info("system objects applied: region=%s %s", self.region, ", ".join(report.applied))
        return report

    def reconcile(self, name: str, *, wait: float | None = None) -> Outcome:
        """Bring endpoint `name` to its desired state in this Region, from fresh reads only.

        The first call of a reconciler (its start) first ensures the Region's namespaces and proxy;
        a call that changed a route refreshes the proxy's route table before it returns (or leaves
        the refresh to another thread that is refreshing it, or to a batch still running:
        `reconcile_many`).
        """
        return self.reconcile_many([name], wait=wait)[name].result()

    def reconcile_many(
        self, names: Sequence[str], *, wait: float | None = None, concurrency: int = 1
    ) -> dict[str, Future[Outcome]]:
        """Reconcile each endpoint of `names` once, up to `concurrency` at a time; returns when all did.

        Endpoints are independent (each reads its own record and objects), so they run
        concurrently; the proxy's route table is refreshed once afterwards if any of them changed
        a route, rather than once per endpoint. Each future holds the outcome or the exception.

        Batches of one execution environment that run at once (the local stack's concurrent
        batches of a poll; in Lambda an environment runs one batch at a time) share one refresh: a
        batch that ends while another is still running leaves its route changes to the last one
        to end, unless the oldest change waiting is `ROUTE_REFRESH_MAX_DELAY` old
        (`PendingRouteChanges.end_batch`). A refresh costs a read and a write of the whole route
        table, so one per batch made the table's size a cost of every batch.
        """
        if not self.system_ready:
            self.ensure_system()
        self.routes.begin_batch()
        changes = RouteChanges()
        try:
            futures = self._run_batch(names, wait, concurrency, changes)
        finally:
            self.routes.end_batch(changes)
        return futures

    def _run_batch(
        self, names: Sequence[str], wait: float | None, concurrency: int, changes: RouteChanges
    ) -> dict[str, Future[Outcome]]:
        """Each endpoint's reconcile; what they did to routes is added to `changes`."""
        tallies = {name: Tally() for name in dict.fromkeys(names)}
        observed = self._observe_batch(list(tallies))
        futures: dict[str, Future[Outcome]] = {}
        workers = max(1, min(concurrency, len(tallies)))
        if workers == 1:
            for name, tally in tallies.items():
                futures[name] = Future()
                try:
                    futures[name].set_result(self._reconcile(name, wait, tally, observed.get(name)))
                except Exception as error:  # handed to the caller through the future
                    futures[name].set_exception(error)
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reconcile") as pool:
                futures = {
                    name: pool.submit(self._reconcile, name, wait, tally, observed.get(name))
                    for name, tally in tallies.items()
                }
        for tally in tallies.values():
            changes.update(tally.routes)
        return futures

    def refresh_routes(self, changes: RouteChanges | None = None) -> None:
        """Hand route changes to the route keeper (None: not known, so it rebuilds the shards)."""
        self.routes.refresh(changes)

    def _observe_batch(self, names: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """For several endpoints, their objects from one list per scope (`Grant.object_scopes`), not one each.

        Listed after the batch was delivered, so as fresh as each endpoint's own list would be;
        the first pass of each endpoint uses it, later passes list that endpoint again.
        """
        if len(names) < 2:
            return {}
        found: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        for obj in self.cluster.list_any(ENDPOINT_LABEL, names):
            owner = labels_of(obj).get(ENDPOINT_LABEL)
            if owner in found:
                found[owner].append(obj)
        return found

    def _reconcile(
        self,
        name: str,
        wait: float | None,
        tally: Tally,
        listed: list[dict[str, Any]] | None = None,
    ) -> Outcome:
        deadline = self._clock() + (self.wait if wait is None else wait)
        last = "no pass ran"
        secret_reads: dict[str, SecretValue] = {}  # each secret read once per reconcile
        carried: tuple[EndpointRecord | None, list[dict[str, Any]]] | None = None
        for _ in range(self.max_passes):
            if carried is None and listed is not None:
                record, observed, listed = self.records.read(name), listed, None
            elif carried is None:
                record = self.records.read(name)
                observed = self.cluster.list({ENDPOINT_LABEL: name})
            else:
                record, observed = carried
                carried = None
            refused = refusal(record, self.region, self.grant, self.settings)
            if refused is not None:
                self.records.record_error(name, record, refused, tally)
                return tally.outcome("terminal", refused)
            # The secrets' versions before the plan: their digest is on the pod template, so a
            # rotation rolls the pods (secret_sync.py).
            read = self.secrets.read(record, secret_reads)
            digest = read.digest if read is not None else None
            step = plan(name, record, self.region, observed, self.settings, secret_digest=digest)
            if step.needs_pods and record is not None:
                pods = self._pods(record)
                step = plan(name, record, self.region, observed, self.settings, pods, secret_digest=digest)
            if step.needs_route is not None:
                route = self._ask(step, tally)
                step = plan(
                    name, record, self.region, observed, self.settings, route=route, secret_digest=digest
                )
            last = step.reason
            if step.acts_on_cluster:
                rejected = self.secrets.sync(
                    name, record, read=read, applies=bool(step.apply), deletes=step.delete, observed=observed
                )
                if rejected is not None:
                    self.records.record_error(name, record, rejected, tally)
                    return tally.outcome("terminal", rejected)
                answers: list[dict[str, Any]] = []
                rejected = self._act(name, record, step, tally, answers, observed)
                if rejected is not None:
                    return tally.outcome("terminal", rejected)
                if step.status is not None:
                    self.records.write_status(name, record, step.status, tally)
                elif not step.delete:
                    # Only applies: the API server's answers are the new observation, and this
                    # read of the record still fences the status write that follows.
                    carried = (record, _replace(observed, answers))
                continue  # observe the result before deciding anything else
            if (
                step.status is not None
                and self.records.write_status(name, record, step.status, tally) is None
            ):
                continue  # lost a race with another writer: read again
            if step.purge:
                self.records.purge(name, record, tally)
            if step.converged:
                return tally.outcome("done", last)
            if self._clock() >= deadline:
                return tally.outcome("requeue", last, self.poll)
            self._sleep(self.poll)
        return tally.outcome("requeue", f"pass limit reached: {last}", self.poll)

    def _ask(self, step: Plan, tally: Tally) -> RouteCheck:
        """What the proxy says of the route `step` would report running. With a proxy to ask, a route
        this call changed is stored first (it is otherwise stored as the batch ends), so the proxy
        can have it; without one, a route is served once stored, and it is (as the batch ends)."""
        assert step.needs_route is not None
        if tally.routes and self.routes.probe is not None:
            self.routes.refresh(tally.routes)
            tally.routes = RouteChanges()
        return RouteCheck(self.routes.unserved(step.needs_route))

    def reconcile_snapshot(self, record: EndpointRecord, observed: Sequence[dict[str, Any]]) -> Outcome:
        """The sweep's fast path: no I/O when a consistent snapshot shows nothing to do.

        Anything to do is done by `reconcile`, which reads both sides afresh first. An endpoint with a
        Secret here always goes through it: only a read of its secrets tells whether one was rotated.
        """
        if self.secrets.wanted(record):
            return self.reconcile(record.endpoint_name, wait=0.0)
        step = plan(record.endpoint_name, record, self.region, observed, self.settings)
        if step.is_noop and step.converged:
            return Outcome("done", detail=step.reason)
        return self.reconcile(record.endpoint_name, wait=0.0)

    # -- steps ---------------------------------------------------------------------------------

    def _act(
        self,
        name: str,
        record: EndpointRecord | None,
        step: Plan,
        tally: Tally,
        answers: list[dict[str, Any]],
        observed: Sequence[dict[str, Any]] = (),
    ) -> str | None:
        if step.delete:
            try:
                self.cluster.delete(step.delete)
            except Exception:  # the deletes may or may not have been made
                if any(is_route_key(ref.kind, ref.namespace) for ref in step.delete):
                    tally.routes.rebuild = True
                raise
            note_deleted(tally.routes, name, step.delete)
            tally.deleted += len(step.delete)
            log.info("deleted %d object(s): endpoint=%s region=%s", len(step.delete), name, self.region)
        owned = {ObjectRef.of(obj).key for obj in observed}
        results = self._apply_all(name, record, step.apply, owned)
        note_applied(tally.routes, name, step.apply, results)
        answered = [result for result in results if isinstance(result, dict)]
        answers.extend(answered)
        tally.applied += len(answered)
        for error in results:
            if isinstance(error, ClusterRejectedError):
                log.warning("rejected: endpoint=%s region=%s: %s", name, self.region, error)
                message = str(error)
                if isinstance(error, KindNotServedError):
                    message = f"{error.kind.kind} needs {error.needs} in {self.region}"
                self.records.record_error(name, record, message, tally)
                return message
            if isinstance(error, Exception):
                raise error
        return None

    def _apply_all(
        self,
        name: str,
        record: EndpointRecord | None,
        objects: Sequence[dict[str, Any]],
        owned: set[tuple[str, str, str]],
    ) -> list[dict[str, Any] | Exception]:
        """Apply independent objects concurrently (one round trip, not one per object), in plan order.

        Every object of a plan is independent: its namespace exists (`ensure_system`), and no
        object's admission depends on another (a Service or autoscaler may name a Deployment that
        does not exist yet). Each result is the API server's answer or the error it raised. An
        object not among `owned` (the keys listed under the endpoint's label) is applied only
        once a read shows its name is free or already the endpoint's (`_claim`).
        """

        def one(obj: dict[str, Any]) -> dict[str, Any] | Exception:
            try:
                if ObjectRef.of(obj).key not in owned:
                    claim(self.cluster, name, record, obj)
                return self.cluster.apply(obj)
            except Exception as error:  # returned in plan order; `_act` decides
                return error

        if len(objects) <= 1:
            return [one(obj) for obj in objects]
        with ThreadPoolExecutor(
            max_workers=min(len(objects), MAX_APPLIES), thread_name_prefix="apply"
        ) as pool:
            return list(pool.map(one, objects))

    def _pods(self, record: EndpointRecord) -> list[dict[str, Any]]:
        """The endpoint's Pods (why replicas are not ready); none when they cannot be listed."""
        try:
            return self.cluster.list_in(POD, record.namespace, {ENDPOINT_LABEL: record.endpoint_name})
        except ClusterRejectedError as error:  # a grant without Pods: report readiness without reasons
            log.warning(
                "pods not listed: endpoint=%s region=%s: %s", record.endpoint_name, self.region, error
            )
            return []
