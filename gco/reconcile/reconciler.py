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
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from gco import endpoint_secrets
from gco.addons import missing_addons
from gco.endpoints.record import EndpointRecord
from gco.endpoints.store import EndpointStore
from gco.model_sources import refusal
from gco.reconcile.access import RECONCILER_GRANT, Grant
from gco.reconcile.errors import ClusterRejectedError, KindNotServedError, ObjectOwnedElsewhereError
from gco.reconcile.objects import (
    ENDPOINT_LABEL,
    HPA,
    INGRESS,
    LIFECYCLE_ANNOTATION,
    MANAGED_BY,
    MANAGER,
    POD,
    ROLE_LABEL,
    SCALED_OBJECT,
    SYSTEM_NAMESPACE,
    ObjectRef,
    annotations_of,
    kind_of,
    labels_of,
)
from gco.reconcile.planner import Plan, StatusWrite, plan
from gco.reconcile.port import Cluster
from gco.reconcile.render import ROUTE_ROLE, route_name
from gco.reconcile.render_scaling import uses_keda
from gco.reconcile.route_changes import PendingRouteChanges, RouteChanges
from gco.reconcile.routes import route_of
from gco.reconcile.secret_sync import EndpointSecret
from gco.reconcile.settings import DEFAULT_SETTINGS, RenderSettings
from gco.reconcile.system import KnownRouteConfig, SystemReport, ensure_system, refresh_route_table

log = logging.getLogger(__name__)
OutcomeKind = Literal["done", "requeue", "terminal"]
MAX_APPLIES = 8  # applies of one plan in flight at once (a plan has at most a dozen objects)
# The longest a route change waits for the last of several concurrent batches to end before a batch
# that ends refreshes the route table anyway (`PendingRouteChanges.end_batch`).
ROUTE_REFRESH_MAX_DELAY = 1.0


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    after: float = 0.0
    detail: str = ""
    applied: int = 0
    deleted: int = 0
    status_writes: int = 0
    purged: bool = False


@dataclass
class _Tally:
    applied: int = 0
    deleted: int = 0
    writes: int = 0
    purged: bool = False
    routes: RouteChanges = field(default_factory=RouteChanges)  # what this reconcile did to routes

    def outcome(self, kind: OutcomeKind, detail: str, after: float = 0.0) -> Outcome:
        return Outcome(kind, after, detail, self.applied, self.deleted, self.writes, self.purged)


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
        wait: float = 0.0,
        poll: float = 0.5,
        max_passes: int = 50,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.region = region
        self.settings = settings
        self.grant = grant
        self.secrets = EndpointSecret(cluster, secrets, region)
        self.system_ready = False
        self._system_lock = threading.Lock()
        # Route changes not yet in the proxy's table, and the batches running.
        self._pending = PendingRouteChanges(max_delay=ROUTE_REFRESH_MAX_DELAY, clock=clock)
        # The proxy ConfigMap this process last wrote (held with the system lock): the next route
        # refresh applies over its version without reading it first (`system.KnownRouteConfig`).
        self._known_route_config: KnownRouteConfig | None = None
        self.wait = wait
        self.poll = poll
        self.max_passes = max_passes
        self._clock = clock
        self._sleep = sleep

    def ensure_system(self, observed: Sequence[dict[str, Any]] | None = None) -> SystemReport:
        """Apply the Region's namespaces and shared proxy where they differ (see `system.py`).

        The full check, on start and in the sweep: the route table is rebuilt from every route
        Ingress (`observed`, or listed now), which heals any drift of the table from the routes.
        Route changes recorded meanwhile are merged after it (a change made after `observed` was
        listed is not in it); when the routes are listed here, every change recorded before is in
        the list, so those are dropped instead of merged again.
        """
        with self._system_lock:
            listed = self._pending.take() if observed is None else RouteChanges()
            try:
                report = ensure_system(self.cluster, self.settings, self.grant, observed)
            except Exception:  # nothing was listed: the changes wait for the next refresh
                self._pending.restore(listed)
                raise
            finally:
                self._known_route_config = None  # the rebuild may have written it: read it next
            self.system_ready = True
            self._log_applied(report)
            report = self._refresh_pending_locked() or report
        self._drain_route_changes()
        return report

    def _log_applied(self, report: SystemReport) -> None:
        if report.applied:
            log.info("system objects applied: region=%s %s", self.region, ", ".join(report.applied))

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
        self._pending.begin_batch()
        changes = RouteChanges()
        try:
            futures = self._run_batch(names, wait, concurrency, changes)
        finally:
            if self._pending.end_batch(changes):
                self._drain_route_changes()
        return futures

    def _run_batch(
        self, names: Sequence[str], wait: float | None, concurrency: int, changes: RouteChanges
    ) -> dict[str, Future[Outcome]]:
        """Each endpoint's reconcile; what they did to routes is added to `changes`."""
        tallies = {name: _Tally() for name in dict.fromkeys(names)}
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
        """Bring the proxy's route table up to date with route changes, coalescing refreshes.

        Parameters:
            changes: what the caller changed (`RouteChanges`): merged into the table the proxy's
                ConfigMap holds, with no list of the routes (`system.refresh_route_table`). None:
                not known, so the table is rebuilt from the listed routes.

        The changes are recorded, then taken by whoever refreshes: a caller whose changes find a
        refresh running returns, and the running caller refreshes again with them before it lets
        go (and re-checks after letting go, so changes recorded while it was letting go are not
        lost). Concurrent batches thus share refreshes, each merging the union of the changes
        recorded before it started. A refresh that fails leaves its changes recorded, ahead of
        any recorded since, for the next refresh.
        """
        self._pending.record(RouteChanges(rebuild=True) if changes is None else changes)
        self._drain_route_changes()

    def _drain_route_changes(self) -> None:
        while self._pending.stale:
            if not self._system_lock.acquire(blocking=False):
                return  # the holder refreshes again: it sees the mark before or after letting go
            try:
                self._refresh_pending_locked()
            finally:
                self._system_lock.release()

    def _refresh_pending_locked(self) -> SystemReport | None:
        """Refresh the table with the recorded changes until none is left (call holding the lock)."""
        report = None
        while self._pending.stale:
            changes = self._pending.take()
            known, self._known_route_config = self._known_route_config, None
            try:
                report = refresh_route_table(self.cluster, self.settings, self.grant, changes, known=known)
            except Exception:
                self._pending.restore(changes)
                raise
            self._known_route_config = report.config
            self._log_applied(report)
        return report

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
        tally: _Tally,
        listed: list[dict[str, Any]] | None = None,
    ) -> Outcome:
        deadline = self._clock() + (self.wait if wait is None else wait)
        last = "no pass ran"
        carried: tuple[EndpointRecord | None, list[dict[str, Any]]] | None = None
        for _ in range(self.max_passes):
            if carried is None and listed is not None:
                record, observed, listed = self._read(name), listed, None
            elif carried is None:
                record = self._read(name)
                observed = self.cluster.list({ENDPOINT_LABEL: name})
            else:
                record, observed = carried
                carried = None
            refused = (
                self._namespace_refusal(record)
                or self._addons_refusal(record)
                or self._source_refusal(record)
                or self._secret_refusal(record)
            )
            if refused is not None:
                self._record_error(name, record, refused, tally)
                return tally.outcome("terminal", refused)
            step = plan(name, record, self.region, observed, self.settings)
            if step.needs_pods and record is not None:
                step = plan(name, record, self.region, observed, self.settings, self._pods(record))
            last = step.reason
            if step.acts_on_cluster:
                rejected = self.secrets.sync(
                    name, record, applies=bool(step.apply), deletes=step.delete, observed=observed
                )
                if rejected is not None:
                    self._record_error(name, record, rejected, tally)
                    return tally.outcome("terminal", rejected)
                answers: list[dict[str, Any]] = []
                rejected = self._act(name, record, step, tally, answers, observed)
                if rejected is not None:
                    return tally.outcome("terminal", rejected)
                if step.status is not None:
                    self._write_status(name, record, step.status, tally)
                elif not step.delete:
                    # Only applies: the API server's answers are the new observation, and this
                    # read of the record still fences the status write that follows.
                    carried = (record, _replace(observed, answers))
                continue  # observe the result before deciding anything else
            if step.status is not None and self._write_status(name, record, step.status, tally) is None:
                continue  # lost a race with another writer: read again
            if step.purge:
                self._purge(name, record, tally)
            if step.converged:
                return tally.outcome("done", last)
            if self._clock() >= deadline:
                return tally.outcome("requeue", last, self.poll)
            self._sleep(self.poll)
        return tally.outcome("requeue", f"pass limit reached: {last}", self.poll)

    def reconcile_snapshot(self, record: EndpointRecord, observed: Sequence[dict[str, Any]]) -> Outcome:
        """The sweep's fast path: no I/O when a consistent snapshot shows nothing to do.

        Anything to do is done by `reconcile`, which reads both sides afresh first.
        """
        step = plan(record.endpoint_name, record, self.region, observed, self.settings)
        if step.is_noop and step.converged:
            return Outcome("done", detail=step.reason)
        return self.reconcile(record.endpoint_name, wait=0.0)

    # -- steps ---------------------------------------------------------------------------------

    def _read(self, name: str) -> EndpointRecord | None:
        record = self.store.get(name, consistent_read=True)
        for _ in range(3):
            if record is None or not record.is_legacy:
                return record
            record = self.store.ensure_lifecycle_metadata(record) or self.store.get(
                name, consistent_read=True
            )
        return record

    def _act(
        self,
        name: str,
        record: EndpointRecord | None,
        step: Plan,
        tally: _Tally,
        answers: list[dict[str, Any]],
        observed: Sequence[dict[str, Any]] = (),
    ) -> str | None:
        if step.delete:
            try:
                self.cluster.delete(step.delete)
            except Exception:  # the deletes may or may not have been made
                if any(_is_route_key(ref.kind, ref.namespace) for ref in step.delete):
                    tally.routes.rebuild = True
                raise
            _note_deleted_routes(tally, name, step.delete)
            tally.deleted += len(step.delete)
            log.info("deleted %d object(s): endpoint=%s region=%s", len(step.delete), name, self.region)
        owned = {ObjectRef.of(obj).key for obj in observed}
        results = self._apply_all(name, record, step.apply, owned)
        _note_applied_routes(tally, name, step.apply, results)
        answered = [result for result in results if isinstance(result, dict)]
        answers.extend(answered)
        tally.applied += len(answered)
        for error in results:
            if isinstance(error, ClusterRejectedError):
                log.warning("rejected: endpoint=%s region=%s: %s", name, self.region, error)
                message = str(error)
                if isinstance(error, KindNotServedError):
                    message = f"{error.kind.kind} needs {error.needs} in {self.region}"
                self._record_error(name, record, message, tally)
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
                    self._claim(name, record, obj)
                return self.cluster.apply(obj)
            except Exception as error:  # returned in plan order; `_act` decides
                return error

        if len(objects) <= 1:
            return [one(obj) for obj in objects]
        with ThreadPoolExecutor(
            max_workers=min(len(objects), MAX_APPLIES), thread_name_prefix="apply"
        ) as pool:
            return list(pool.map(one, objects))

    def _claim(self, name: str, record: EndpointRecord | None, obj: dict[str, Any]) -> None:
        """Check that applying `obj` creates it or updates the endpoint's own object of this lifecycle.

        A server-side apply with `force` takes over whatever holds the name, so an object the
        endpoint's list did not show is read first. What it finds and does not own is left alone.

        Raises:
            ObjectOwnedElsewhereError: the name is held by another endpoint's object, another
                lifecycle's, or one gco did not make.
        """
        ref = ObjectRef.of(obj)
        stored = self.cluster.get(kind_of(obj), ref.namespace, ref.name)
        if stored is None:
            return
        labels = labels_of(stored)
        holder = labels.get(ENDPOINT_LABEL)
        lifecycle = annotations_of(stored).get(LIFECYCLE_ANNOTATION)
        if labels.get(MANAGED_BY) != MANAGER or not holder:
            whose = "an object gco did not make"
        elif holder != name:
            whose = f"endpoint {holder}"
        elif record is None or lifecycle != record.lifecycle_id:
            whose = f"another lifecycle of {name} ({(lifecycle or 'none')[:12]})"
        else:
            return
        raise ObjectOwnedElsewhereError(f"{ref} is held by {whose}: not applied over")

    def _pods(self, record: EndpointRecord) -> list[dict[str, Any]]:
        """The endpoint's Pods (why replicas are not ready); none when they cannot be listed."""
        try:
            return self.cluster.list_in(POD, record.namespace, {ENDPOINT_LABEL: record.endpoint_name})
        except ClusterRejectedError as error:  # a grant without Pods: report readiness without reasons
            log.warning(
                "pods not listed: endpoint=%s region=%s: %s", record.endpoint_name, self.region, error
            )
            return []

    def _namespace_refusal(self, record: EndpointRecord | None) -> str | None:
        """Why a live record's namespace cannot be served here (not in the grant), or None."""
        if record is None or record.is_deleted or self.region not in record.target_regions:
            return None
        granted = [ns for ns in self.grant.namespaces if ns != SYSTEM_NAMESPACE]
        if record.namespace in granted:
            return None
        allowed = ", ".join(granted)
        return f"namespace {record.namespace} is not granted to gco in {self.region} (granted: {allowed})"

    def _addons_refusal(self, record: EndpointRecord | None) -> str | None:
        """What a live record's autoscaling needs and this Region's cluster lacks, or None."""
        if record is None or record.is_deleted or self.region not in record.target_regions:
            return None
        autoscaling = record.spec.autoscaling
        if not autoscaling.enabled:
            return None
        missing = missing_addons((metric.type for metric in autoscaling.metrics), self.settings.addons)
        if not missing:
            return None
        kind = SCALED_OBJECT.kind if uses_keda(autoscaling) else HPA.kind
        return f"{kind} needs {', '.join(missing)} in {self.region}"

    def _source_refusal(self, record: EndpointRecord | None) -> str | None:
        """Why a live record's `model_source` cannot be read by its pods here, or None."""
        if record is None or record.is_deleted or self.region not in record.target_regions:
            return None
        reason = refusal(record.spec.model_source, self.settings.model_sources)
        return None if reason is None else f"model_source: {reason}"

    def _secret_refusal(self, record: EndpointRecord | None) -> str | None:
        """Why a live record's `secret_env` names a secret outside those its Region may read, or None."""
        if record is None or record.is_deleted or self.region not in record.target_regions:
            return None
        found = endpoint_secrets.refusal(record.spec.secret_env, self.settings.endpoint_secrets)
        return None if found is None else f"{found[0]}: {found[1]}"

    def _record_error(self, name: str, record: EndpointRecord | None, message: str, tally: _Tally) -> None:
        """A terminal `error` status for a live record, written only when it differs."""
        if record is None or record.is_deleted:
            return
        failed = StatusWrite(
            state="error",
            lifecycle_id=record.lifecycle_id,
            region_generation=record.region_generations.get(self.region),
            error=message[:500],
        )
        current = record.region_status.get(self.region)
        if current is None or current.state != "error" or current.error != failed.error:
            self._write_status(name, record, failed, tally)

    def _write_status(
        self, name: str, record: EndpointRecord | None, status: StatusWrite, tally: _Tally
    ) -> EndpointRecord | None:
        written = self.store.update_region_status(
            name,
            self.region,
            status.state,
            replicas_ready=status.replicas_ready,
            replicas_desired=status.replicas_desired,
            error=status.error,
            details=status.details(),
            expected_lifecycle_id=status.lifecycle_id,
            expected_region_generation=status.region_generation,
            expected_deletion_generation=status.deletion_generation,
        )
        if written is None:
            return None
        tally.writes += 1
        log.info("status: endpoint=%s region=%s state=%s", name, self.region, status.state)
        if status.deletion_generation is not None and not written.pending_deletion_regions():
            self._purge(name, written, tally)  # the last acknowledgement purges
        return written

    def _purge(self, name: str, record: EndpointRecord | None, tally: _Tally) -> None:
        if record is None or record.deletion_generation is None or tally.purged:
            return
        tally.purged = self.store.purge(
            name,
            expected_lifecycle_id=record.lifecycle_id,
            expected_deletion_generation=record.deletion_generation,
        )
        if tally.purged:
            log.info("purged: endpoint=%s (every Region acknowledged)", name)


# -- what a pass did to the Region's routes (`RouteChanges`) ------------------------------------


def _is_route_key(kind: str, namespace: str) -> bool:
    """An Ingress in the system namespace: a route (Ingresses elsewhere are never routes)."""
    return kind == INGRESS.kind and namespace == SYSTEM_NAMESPACE


def _note_deleted_routes(tally: _Tally, name: str, deleted: Sequence[ObjectRef]) -> None:
    """The endpoint's route Ingress deleted: it has no route. Any other Ingress there is none gco
    renders (made by hand): what its deletion did to the table only a rebuild knows."""
    for ref in deleted:
        if _is_route_key(ref.kind, ref.namespace):
            if ref.name == route_name(name):
                tally.routes.put(name, None)
            else:
                tally.routes.rebuild = True


def _note_applied_routes(
    tally: _Tally,
    name: str,
    applied: Sequence[dict[str, Any]],
    results: Sequence[dict[str, Any] | Exception],
) -> None:
    """Each applied route's answer is the endpoint's route now; a failed apply's effect is unknown."""
    for obj, result in zip(applied, results, strict=True):
        ref = ObjectRef.of(obj)
        if not _is_route_key(ref.kind, ref.namespace):
            continue
        if isinstance(result, dict) and ref.name == route_name(name):
            # The answer is the stored object; its kind as applied, should an answer leave it out.
            stored = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], **result}
            tally.routes.put(name, route_of(stored) if _listed_as_route(stored) else None)
        else:
            tally.routes.rebuild = True


def _listed_as_route(obj: dict[str, Any]) -> bool:
    """Whether the route list (gco's label selector for routes) would list the object."""
    labels = labels_of(obj)
    return labels.get(MANAGED_BY) == MANAGER and labels.get(ROLE_LABEL) == ROUTE_ROLE
