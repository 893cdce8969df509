"""The Regional reconciler: endpoint names in, each endpoint brought to its record in one Region.

Level-triggered and idempotent: whatever triggered it (a stream record, the sweep, a retry), a
reconcile reads the record with a strongly consistent read of the home table and the endpoint's
objects from the Region's cluster, and acts on those alone. One pass observes (`Observation`),
plans (`planner.plan`, gathering the Pods or the proxy's answer when the plan asks), and acts
(`acting.act`); passes repeat until the plan has nothing left to do or the call's wait is over.
`docs/reconciler.md` draws one batch. Outcomes, as in controller-runtime:

- `done`: the Region is as desired (nothing is left to wait for);
- `requeue`: progressing (waiting for readiness or termination): look again after `after` s;
- `terminal`: the endpoint cannot be served here as it stands (`refusals.refusal`: namespace not
  granted, an add-on, model source, secret or storage the Region lacks), or the API server rejected
  an object, or holds a rendered name under another owner (`ObjectOwnedElsewhereError`, never
  applied over), or does not serve a kind the endpoint needs (`ScaledObject needs KEDA in
  <region>`); recorded as the Region's status `error`, not retried until the record changes;
- an exception (`ClusterUnavailableError`, `ClusterAuthError`, `StoreUnavailableError`,
  `SecretUnavailableError`): retry with backoff (the stream redelivers the record; the sweep picks
  it up in any case).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from gco.endpoints.record import EndpointRecord
from gco.endpoints.store import EndpointStore
from gco.reconcile.access import RECONCILER_GRANT, Grant
from gco.reconcile.acting import act
from gco.reconcile.batches import run_each, settled
from gco.reconcile.errors import ClusterRejectedError
from gco.reconcile.objects import ENDPOINT_LABEL, POD, ObjectRef, labels_of
from gco.reconcile.observation import (
    Acted,
    AwaitRoute,
    Observation,
    PassResult,
    Planned,
    Prefetched,
    Rejected,
    plan_of,
)
from gco.reconcile.planner import Plan, RouteCheck, plan
from gco.reconcile.port import Cluster
from gco.reconcile.proxy.proxy_probe import ProxyProbe
from gco.reconcile.proxy.route_changes import RouteChanges
from gco.reconcile.proxy.route_keeper import RouteKeeper
from gco.reconcile.proxy.routes import Route
from gco.reconcile.record_writes import Outcome, RecordWriter, Tally
from gco.reconcile.refusals import refusal
from gco.reconcile.secret_sync import EndpointSecret
from gco.reconcile.settings import DEFAULT_SETTINGS, RenderSettings
from gco.reconcile.system import SystemReport, ensure_system
from gco.secrets import endpoint_secrets
from gco.secrets.endpoint_secrets import SecretValue

log = logging.getLogger(__name__)


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

        The first call of a reconciler (its start) first ensures the Region's namespaces and proxy.
        A batch of one (`reconcile_many`).

        Raises:
            ClusterError: the cluster could not be reached or refused the credentials.
            StoreUnavailableError: the home table could not be read or written.
            SecretUnavailableError: Secrets Manager could not answer.
        """
        return self.reconcile_many([name], wait=wait)[name].result()

    def reconcile_many(
        self, names: Sequence[str], *, wait: float | None = None, concurrency: int = 1
    ) -> dict[str, Future[Outcome]]:
        """Reconcile each endpoint of `names` once, up to `concurrency` at a time; returns when all did.

        The batch's objects are listed once per scope for all of its endpoints; the route changes
        its endpoints made are handed to the route keeper as the batch ends (`RouteKeeper.end_batch`,
        which may leave them to a concurrent batch of this process that is still running), or
        before the proxy is asked about them (`_run_batch`).

        Returns:
            Each endpoint's future: its `Outcome`, or the exception its reconcile raised.
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
        """Each endpoint's reconcile; what they did to routes is added to `changes`.

        With a proxy to ask, in two phases (`docs/reconciler.md` draws it): each endpoint observes,
        plans and acts until its plan asks what the proxy says of its route (`AwaitRoute`); then the
        batch's route changes are merged into their shards at once and the proxy's pods told to load
        them (`RouteKeeper.publish`), those pods are asked for every waiting endpoint's route, and
        those endpoints go on with the answer.
        """
        deadline = self._clock() + (self.wait if wait is None else wait)  # one for both phases
        tallies = {name: Tally() for name in dict.fromkeys(names)}
        observed = self._observe_batch(list(tallies))
        park = self.routes.probe is not None
        first = run_each(
            list(tallies),
            lambda name: self._reconcile(name, deadline, tallies[name], observed.get(name), park=park),
            concurrency,
        )
        futures: dict[str, Future[Outcome]] = {}
        parked: dict[str, AwaitRoute] = {}
        for name, future in first.items():
            error = future.exception()
            result = future.result() if error is None else None
            if isinstance(result, AwaitRoute):
                parked[name] = result
            else:
                futures[name] = settled(result, error)
        if parked:
            futures.update(self._resume(parked, tallies, deadline, concurrency))
        for tally in tallies.values():
            changes.update(tally.routes)
        return futures

    def _resume(
        self, parked: dict[str, AwaitRoute], tallies: dict[str, Tally], deadline: float, concurrency: int
    ) -> dict[str, Future[Outcome]]:
        """Publish the batch's route changes, answer each parked endpoint's route, and go on with it."""
        pending = RouteChanges()
        for tally in tallies.values():
            pending.update(tally.routes)
            tally.routes = RouteChanges()
        try:
            published = self.routes.publish(pending)  # also what other batches left pending
            asked = self.routes.unserved_all([waiting.route for waiting in parked.values()], published.pods)
        except Exception as error:  # every parked endpoint fails with it (its changes stay recorded)
            return {name: settled(error=error) for name in parked}
        checks = {name: RouteCheck(asked[waiting.route.endpoint]) for name, waiting in parked.items()}

        def go_on(name: str) -> Outcome:
            start = parked[name].seen.with_route(checks[name])
            result = self._reconcile(name, deadline, tallies[name], start=start)
            assert isinstance(result, Outcome)  # not parked again: park is off
            return result

        return run_each(list(parked), go_on, concurrency)

    def refresh_routes(self, changes: RouteChanges | None = None) -> None:
        """Hand route changes to the route keeper (None: not known, so it rebuilds the shards)."""
        self.routes.refresh(changes)

    def _observe_batch(self, names: Sequence[str]) -> dict[str, Prefetched]:
        """For several endpoints, their objects from one list per scope (`Grant.object_scopes`) and
        their records from one strongly consistent BatchGetItem, not one read each; in the same
        round one more list per scope, of the objects without an endpoint's label, so that the
        names the endpoints render are claimed without a read each (`ownership`).

        Read after the batch was delivered, the records after the objects (as each endpoint's own
        reads would be); the first pass of each endpoint uses them, later passes read afresh. A
        record the batch read could not answer for is read by its endpoint alone.
        """
        if len(names) < 2:
            return {}
        found: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        listed = self.cluster.list_any(ENDPOINT_LABEL, names, or_absent=True)
        for obj in listed:
            owner = labels_of(obj).get(ENDPOINT_LABEL)
            if owner in found:
                found[owner].append(obj)
        holders = {ObjectRef.of(obj).key: obj for obj in listed}
        records = self.records.read_many(names)
        return {
            name: Prefetched(tuple(objects), records.get(name), name in records, holders)
            for name, objects in found.items()
        }

    def _reconcile(
        self,
        name: str,
        deadline: float,
        tally: Tally,
        first: Prefetched | None = None,
        *,
        start: Observation | None = None,
        park: bool = False,
    ) -> Outcome | AwaitRoute:
        """Passes of observe, plan (gathering what the plan asks for), act, until done or `deadline`
        (monotonic seconds) has passed.

        Each pass starts from one `Observation`: `start` (a parked endpoint's, with the proxy's
        answer), the API server's answers to the last pass's applies when it only applied
        (`Acted.next`), else a fresh read of the record and of the objects (the batch's list on the
        first pass). Every terminal reason, wherever found, ends here. With `park`, a plan that asks
        the proxy about the route ends the call with `AwaitRoute` (`_run_batch` asks for the batch).
        """
        last = "no pass ran"
        secret_reads: dict[str, SecretValue] = {}  # each secret read once per reconcile
        carried = start
        for _ in range(self.max_passes):
            seen = carried or self._observe(name, first, secret_reads)
            carried, first = None, None
            result = self._pass(name, seen, tally, park)
            if isinstance(result, AwaitRoute):
                return result
            if isinstance(result, Rejected):
                self.records.record_error(name, seen.record, result.message, tally)
                return tally.outcome("terminal", result.message)
            last = result.step.reason
            if isinstance(result, Acted):
                carried = result.next
                continue  # observe the result before deciding anything else
            step = result.step
            if (
                step.status is not None
                and self.records.write_status(name, seen.record, step.status, tally) is None
            ):
                continue  # lost a race with another writer: read again
            if step.purge:
                self.records.purge(name, seen.record, tally)
            if step.converged:
                return tally.outcome("done", last)
            if self._clock() >= deadline:
                return tally.outcome("requeue", last, self.poll)
            self._sleep(self.poll)
        return tally.outcome("requeue", f"pass limit reached: {last}", self.poll)

    def _observe(
        self, name: str, first: Prefetched | None, secret_reads: dict[str, SecretValue]
    ) -> Observation:
        """The record and the endpoint's objects (as its batch read them, or read now), and its
        secrets' versions (their digest is on the pod template, so a rotation rolls the pods)."""
        record = first.record if first is not None and first.has_record else self.records.read(name)
        objects = first.objects if first is not None else tuple(self.cluster.list({ENDPOINT_LABEL: name}))
        holders = first.holders if first is not None else None
        return Observation(record, tuple(objects), self.secrets.read(record, secret_reads), holders=holders)

    def _pass(self, name: str, seen: Observation, tally: Tally, park: bool) -> PassResult:
        """One pass on `seen`: refuse, or plan (gathering what the plan asks for) and act."""
        refused = refusal(seen.record, self.region, self.grant, self.settings)
        if refused is not None:
            return Rejected(refused)
        step, seen = self._gather(name, seen, tally, park)
        if step.needs_route is not None:
            return AwaitRoute(seen, step.needs_route)
        if not step.acts_on_cluster:
            return Planned(step)
        record = seen.record
        rejected = self.secrets.sync(
            name,
            record,
            read=seen.secret,
            applies=bool(step.apply),
            deletes=step.delete,
            observed=seen.objects,
        )
        if rejected is not None:
            return Rejected(rejected)
        done = act(self.cluster, self.region, name, seen, step, tally)
        if done.rejected is not None:
            return Rejected(done.rejected)
        if step.status is not None:
            self.records.write_status(name, record, step.status, tally)
            return Acted(step, None)
        # Only applies: the API server's answers are the new observation, and this read of the
        # record still fences the status write that follows. After deletes, list afresh.
        return Acted(step, None if step.delete else seen.after_applies(done.answers))

    def _gather(self, name: str, seen: Observation, tally: Tally, park: bool) -> tuple[Plan, Observation]:
        """Plan on `seen`, adding what the plan asks for and planning again until it asks for nothing
        (at most twice: `planner` module docstring); returns the last plan and what it was made on.
        With `park`, a plan that asks about the route is returned as it is (the batch asks)."""
        step = plan_of(name, seen, self.region, self.settings)
        seen = seen.rendered_by(step)
        while step.needs_pods or step.needs_route is not None:
            if step.needs_route is not None:
                if park:
                    return step, seen
                seen = seen.with_route(self._ask(step.needs_route, tally))
            else:
                seen = seen.with_pods(self._pods(name, seen.record))
            step = plan_of(name, seen, self.region, self.settings)
        return step, seen

    def _ask(self, route: Route, tally: Tally) -> RouteCheck:
        """What the proxy says of `route`. With a proxy to ask, a route this call changed is stored
        first (it is otherwise stored as the batch ends), so the proxy can have it; without one, a
        route is served once stored, and it is (as the batch ends)."""
        if tally.routes and self.routes.probe is not None:
            self.routes.refresh(tally.routes)
            tally.routes = RouteChanges()
        return RouteCheck(self.routes.unserved(route))

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

    def _pods(self, name: str, record: EndpointRecord | None) -> list[dict[str, Any]]:
        """The endpoint's Pods (why replicas are not ready); none when they cannot be listed."""
        if record is None:
            return []
        try:
            return self.cluster.list_in(POD, record.namespace, {ENDPOINT_LABEL: name})
        except ClusterRejectedError as error:  # a grant without Pods: report readiness without reasons
            log.warning("pods not listed: endpoint=%s region=%s: %s", name, self.region, error)
            return []
