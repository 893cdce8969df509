"""The pure half of the reconciler: (record, Region, observed objects) -> what to do.

`plan` never performs I/O. The reconciler executes a plan, observes again and re-plans until a
plan has nothing left to do; so every decision is taken on a fresh observation.

A plan may ask for one more reading before it decides a status (`Plan.needs_pods`: why replicas are
not ready; `Plan.needs_route`: whether the proxy serves the route). It asks for at most one of them
(`Plan.__post_init__` enforces it): the Pods only while replicas are short of ready, the route only
once every replica is ready and rolled out. Given what it asked for, it never asks for it again, so
the reconciler's gather-then-plan loop (`gco.reconcile.observation`) ends after at most two asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gco.endpoints.observed_state import CANARY_DESIRED, CANARY_READY
from gco.endpoints.record import EndpointRecord, RegionStatus
from gco.endpoints.states import RegionState
from gco.reconcile.objects import HASH_ANNOTATION, ROLE_LABEL, ObjectRef, annotations_of, lifecycle_of
from gco.reconcile.pods import trouble
from gco.reconcile.proxy.routes import Route, route_of
from gco.reconcile.render import render
from gco.reconcile.settings import DEFAULT_SETTINGS, RenderSettings


@dataclass(frozen=True)
class RouteCheck:
    """What the Region's proxy said of the endpoint's route: None when it serves it, else why not."""

    unserved: str | None = None


@dataclass(frozen=True)
class MayRun:
    """`running` may be written: the proxy serves the route, there is none, or it was reported."""


@dataclass(frozen=True)
class AskProxy:
    """`running` waits for what the proxy says of `route` (not asked yet)."""

    route: Route


@dataclass(frozen=True)
class NotServed:
    """The proxy does not serve the route yet: the endpoint stays progressing, with `reason`."""

    reason: str


RouteGate = MayRun | AskProxy | NotServed


@dataclass(frozen=True)
class StatusWrite:
    """One fenced region_status write; `deletion_generation` set makes it a deletion acknowledgement."""

    state: RegionState
    replicas_ready: int = 0
    replicas_desired: int = 0
    lifecycle_id: str | None = None
    region_generation: str | None = None
    deletion_generation: str | None = None
    error: str | None = None
    restarts: int | None = None  # with `reason`: why replicas are not ready (`gco.reconcile.pods`)
    reason: str | None = None
    canary: tuple[int, int] | None = None  # (ready, desired) of the canary, counted in the totals too

    def details(self) -> dict[str, int | str | None] | None:
        """The status details this write carries: why replicas are not ready (when that is known)
        and the canary's readiness (when it has one)."""
        details: dict[str, int | str | None] = {}
        if self.reason is not None:
            details.update(restarts=self.restarts, reason=self.reason)
        if self.canary is not None:
            details.update({CANARY_READY: self.canary[0], CANARY_DESIRED: self.canary[1]})
        return details or None


@dataclass(frozen=True)
class Plan:
    """The actions of one pass: deletes first, then applies, then (with nothing else) a status write."""

    delete: tuple[ObjectRef, ...] = ()
    apply: tuple[dict[str, Any], ...] = ()
    status: StatusWrite | None = None
    purge: bool = False
    converged: bool = True
    reason: str = ""
    desired: tuple[dict[str, Any], ...] = field(default=(), repr=False)
    # Replicas are short of ready and no Pods were given: plan again with the endpoint's Pods.
    needs_pods: bool = False
    # The endpoint would be reported running: plan again with what the proxy says of this route.
    needs_route: Route | None = None

    def __post_init__(self) -> None:
        """A plan asks for at most one reading (module docstring); one that asks acts on nothing.

        Raises:
            ValueError: a plan asks for both the Pods and the route, or asks while it acts.
        """
        if self.needs_pods and self.needs_route is not None:
            raise ValueError("a plan asks for the Pods or for the route, never both")
        if (self.needs_pods or self.needs_route is not None) and (
            self.delete or self.apply or self.status or self.purge
        ):
            raise ValueError("a plan that asks for a reading acts on nothing until it has it")

    @property
    def acts_on_cluster(self) -> bool:
        return bool(self.delete or self.apply)

    @property
    def is_noop(self) -> bool:
        return not (self.delete or self.apply or self.status or self.purge)


def _terminating(obj: dict[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _deletions(observed: Sequence[dict[str, Any]]) -> tuple[ObjectRef, ...]:
    return tuple(sorted(ObjectRef.of(obj) for obj in observed if not _terminating(obj)))


def _changed(current: RegionStatus | None, wanted: StatusWrite) -> bool:
    if current is None:
        return True
    return (
        current.state != wanted.state
        or current.replicas_ready != wanted.replicas_ready
        or current.replicas_desired != wanted.replicas_desired
        or current.lifecycle_id != wanted.lifecycle_id
        or current.region_generation != wanted.region_generation
        or (
            wanted.deletion_generation is not None
            and current.deletion_generation != wanted.deletion_generation
        )
        or current.error != wanted.error
        or (current.model_extra or {}).get("reason") != wanted.reason
        or (current.model_extra or {}).get("restarts") != wanted.restarts
        or _canary_of(current) != wanted.canary
    )


def _canary_of(status: RegionStatus) -> tuple[int, int] | None:
    extra = status.model_extra or {}
    ready, desired = extra.get(CANARY_READY), extra.get(CANARY_DESIRED)
    return (int(ready), int(desired)) if ready is not None and desired is not None else None


def _status_if_changed(record: EndpointRecord, region: str, wanted: StatusWrite) -> StatusWrite | None:
    return wanted if _changed(record.region_status.get(region), wanted) else None


def plan(
    name: str,
    record: EndpointRecord | None,
    region: str,
    observed: Sequence[dict[str, Any]],
    settings: RenderSettings = DEFAULT_SETTINGS,
    pods: Sequence[dict[str, Any]] | None = None,
    route: RouteCheck | None = None,
    *,
    secret_digest: str | None = None,
    rendered: Sequence[dict[str, Any]] | None = None,
) -> Plan:
    """What the Region's reconciler should do next for endpoint `name`.

    Parameters:
        record: a strongly consistent read of the record (None: it does not exist, or was purged).
        observed: every object in the Region's cluster labelled with the endpoint's name.
        pods: the endpoint's Pods, read only when a plan asked for them (`Plan.needs_pods`).
        route: what the proxy says of the endpoint's route, asked only when a plan asked for it
            (`Plan.needs_route`): `running` means a request through the proxy reaches a ready
            replica, so it is written only once the proxy serves the route as rendered.
        secret_digest: the digest of the endpoint's secrets as read now (`render`), or None.
        rendered: what `render` gives for this record, Region, settings and digest, when an earlier
            plan on the same reading rendered it (`Plan.desired`; rendering is pure); None: render.
    """
    if record is None:
        return Plan(delete=_deletions(observed), converged=not observed, reason="no record: remove leftovers")
    if record.is_deleted:
        return _plan_deleted(record, region, observed)
    if region not in record.target_regions:
        return _plan_removed(record, region, observed)
    desired = (
        list(rendered)
        if rendered is not None
        else render(record, region, settings, secret_digest=secret_digest)
    )
    return _plan_live(record, region, observed, desired, pods, route)


def _plan_deleted(record: EndpointRecord, region: str, observed: Sequence[dict[str, Any]]) -> Plan:
    if observed:
        return Plan(delete=_deletions(observed), converged=False, reason="deleted: removing objects")
    pending = record.pending_deletion_regions()
    if region in pending:
        ack = StatusWrite(
            state="deleted",
            lifecycle_id=record.lifecycle_id,
            deletion_generation=record.deletion_generation,
        )
        return Plan(status=ack, converged=True, reason="deleted: objects gone, acknowledging")
    if not pending:
        return Plan(purge=True, converged=True, reason="deleted: every Region acknowledged, purging")
    return Plan(converged=True, reason=f"deleted: waiting for {', '.join(pending)}")


def _plan_removed(record: EndpointRecord, region: str, observed: Sequence[dict[str, Any]]) -> Plan:
    if observed:
        status = None
        if region in record.cleanup_regions:
            deleting = StatusWrite(
                state="deleting",
                lifecycle_id=record.lifecycle_id,
                region_generation=record.region_generations.get(region),
            )
            status = _status_if_changed(record, region, deleting)
        return Plan(
            delete=_deletions(observed), status=status, converged=False, reason="Region removed: deleting"
        )
    if region not in record.cleanup_regions:
        return Plan(reason="not a member of this lifecycle")
    ack = StatusWrite(
        state="deleted",
        lifecycle_id=record.lifecycle_id,
        region_generation=record.region_generations.get(region),
    )
    return Plan(status=_status_if_changed(record, region, ack), reason="Region removed: acknowledged")


def _observed_replicas(obj: dict[str, Any]) -> tuple[int, int, bool]:
    """(ready, desired, rolled out) of an observed Deployment."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    desired = int(spec.get("replicas", 1))
    ready = int(status.get("readyReplicas", 0))
    generation = int((obj.get("metadata") or {}).get("generation", 0))
    rolled = int(status.get("observedGeneration", 0)) >= generation and int(
        status.get("updatedReplicas", 0)
    ) >= min(desired, int(status.get("replicas", desired)))
    return ready, desired, rolled


def _plan_live(
    record: EndpointRecord,
    region: str,
    observed: Sequence[dict[str, Any]],
    desired: list[dict[str, Any]],
    pods: Sequence[dict[str, Any]] | None,
    route: RouteCheck | None = None,
) -> Plan:
    wanted = {ObjectRef.of(obj).key: obj for obj in desired}
    current: dict[tuple[str, str, str], dict[str, Any]] = {}
    delete: list[ObjectRef] = []
    blocked: set[tuple[str, str, str]] = set()
    for obj in observed:
        key = ObjectRef.of(obj).key
        if _terminating(obj):
            blocked.add(key)
        elif lifecycle_of(obj) != record.lifecycle_id or key not in wanted:
            delete.append(ObjectRef.of(obj))  # another lifecycle's, or no longer rendered: never adopted
            blocked.add(key)
        else:
            current[key] = obj
    apply = []
    for key, obj in wanted.items():
        if key in blocked:
            continue
        existing = current.get(key)
        if existing is None or annotations_of(existing).get(HASH_ANNOTATION) != annotations_of(obj).get(
            HASH_ANNOTATION
        ):
            apply.append(obj)
        elif (
            "replicas" in obj["spec"]
            and (existing.get("spec") or {}).get("replicas") != obj["spec"]["replicas"]
        ):
            apply.append(obj)  # drift: someone scaled what gco owns
    if delete or apply or blocked:
        return Plan(
            delete=tuple(sorted(delete)),
            apply=tuple(apply),
            converged=False,
            reason="applying desired objects",
            desired=tuple(desired),
        )
    ready, total, rolled, canary = _readiness(wanted, current)
    previous = record.region_status.get(region)
    same = previous is not None and previous.lifecycle_id == record.lifecycle_id
    progressing: RegionState = (
        "updating" if same and previous and previous.state in ("running", "updating") else "creating"
    )
    state: RegionState
    unserved = None
    if record.desired_state == "stopped":
        state = "stopped" if ready == 0 else "stopping"
        done = ready == 0
    elif rolled:
        state, done = "running", True
        gate = _route_gate(record, region, desired, previous, ready, total, canary, route)
        if isinstance(gate, AskProxy):
            return Plan(
                converged=False,
                reason="observed running: asking the proxy",
                needs_route=gate.route,
                desired=tuple(desired),
            )
        if isinstance(gate, NotServed):
            state, done, unserved = progressing, False, gate.reason
    else:
        state, done = progressing, False
    found = None
    if not done and ready < total:
        if pods is None:
            return Plan(
                converged=False,
                reason=f"observed {state} {ready}/{total}: reading Pods",
                needs_pods=True,
                desired=tuple(desired),
            )
        found = trouble(pods)
    write = StatusWrite(
        state=state,
        replicas_ready=ready,
        replicas_desired=total,
        lifecycle_id=record.lifecycle_id,
        region_generation=record.region_generations.get(region),
        restarts=found.restarts if found else None,
        reason=found.reason if found else unserved,
        canary=canary,
    )
    return Plan(
        status=_status_if_changed(record, region, write),
        converged=done,
        reason=unserved or f"observed {state} {ready}/{total}",
        desired=tuple(desired),
    )


def _readiness(
    wanted: dict[tuple[str, str, str], dict[str, Any]], current: dict[tuple[str, str, str], dict[str, Any]]
) -> tuple[int, int, bool, tuple[int, int] | None]:
    """(ready, desired, rolled out, the canary's (ready, desired)) over the endpoint's Deployments."""
    ready = total = 0
    rolled = True
    canary: tuple[int, int] | None = None
    for key, obj in wanted.items():
        if obj["kind"] == "Deployment":
            count_ready, count_desired, count_rolled = _observed_replicas(current[key])
            ready += min(count_ready, count_desired)
            total += count_desired
            rolled = rolled and count_rolled and count_ready >= count_desired
            if obj["metadata"]["labels"].get(ROLE_LABEL) == "canary":
                canary = (min(count_ready, count_desired), count_desired)
    return ready, total, rolled, canary


def _route_gate(
    record: EndpointRecord,
    region: str,
    desired: Sequence[dict[str, Any]],
    previous: RegionStatus | None,
    ready: int,
    total: int,
    canary: tuple[int, int] | None,
    route: RouteCheck | None,
) -> RouteGate:
    """Whether `running` may be written (`MayRun`: served, no route, or already reported), the
    route to ask the proxy about (`AskProxy`: no answer yet), or why not yet (`NotServed`).

    Asked only when the running status would be a change: an endpoint already reported running was
    served then, so steady state costs no request to the proxy.
    """
    running = StatusWrite(
        state="running",
        replicas_ready=ready,
        replicas_desired=total,
        lifecycle_id=record.lifecycle_id,
        region_generation=record.region_generations.get(region),
        canary=canary,
    )
    wanted = next((found for obj in desired if (found := route_of(obj)) is not None), None)
    if wanted is None or not _changed(previous, running):
        return MayRun()
    if route is None:
        return AskProxy(wanted)
    return MayRun() if route.unserved is None else NotServed(route.unserved)
