"""What one pass of an endpoint's reconcile knows, and what a pass came to: plain values, no I/O.

A pass starts from one `Observation`: the record (a strongly consistent read), the objects labelled
with the endpoint's name, and its secrets as read now. The planner may ask for one more reading
(the endpoint's Pods, or what the proxy says of its route: `planner.Plan`); the reconciler adds it
to the same observation (`with_pods`, `with_route`) and plans again, until the plan asks for
nothing more. `plan_of` is that planning, with the planner's promise checked: a plan never asks
again for what the observation already holds, so the loop ends.

A pass ends as one `PassResult`: `Rejected` (a terminal reason, the one path that records the
Region's `error` status), `Acted` (objects were applied or deleted: observe again, from `next` when
the API server's answers are the new observation), `Planned` (nothing to act on: write the status
the plan carries, purge, finish or wait) or `AwaitRoute` (the plan asks the proxy about the route,
which the batch does for all its endpoints at once, after it merged their route changes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gco.endpoints.record import EndpointRecord
from gco.reconcile.objects import ObjectRef
from gco.reconcile.ownership import Holders
from gco.reconcile.planner import Plan, RouteCheck, plan
from gco.reconcile.proxy.routes import Route
from gco.reconcile.secret_sync import SecretRead
from gco.reconcile.settings import RenderSettings


@dataclass(frozen=True)
class Observation:
    """One endpoint's state as one pass reads it.

    Attributes:
        record: the record (None: it does not exist, or was purged).
        objects: every object in the Region's cluster labelled with the endpoint's name.
        secret: its `secret_env` as read now (None: it has no Secret here).
        pods: its Pods, once a plan asked for them (None: not read).
        route: what the proxy said of its route, once a plan asked (None: not asked).
        holders: what holds each name the batch's lists saw, by `ObjectRef.key`, for the claims
            (`ownership.claim`); None: not listed, so a name the endpoint does not own is read.
        rendered: the objects a plan on this reading rendered (`Plan.desired`), so that the plans
            after it on the same record and secrets do not render again; None: not rendered yet.
    """

    record: EndpointRecord | None
    objects: tuple[dict[str, Any], ...]
    secret: SecretRead | None = field(default=None, repr=False)
    pods: tuple[dict[str, Any], ...] | None = None
    route: RouteCheck | None = None
    holders: Holders | None = field(default=None, repr=False)
    rendered: tuple[dict[str, Any], ...] | None = field(default=None, repr=False)

    def with_pods(self, pods: Sequence[dict[str, Any]]) -> Observation:
        return replace(self, pods=tuple(pods))

    def with_route(self, route: RouteCheck) -> Observation:
        return replace(self, route=route)

    def after_applies(self, answers: Sequence[dict[str, Any]]) -> Observation:
        """The same record, with each object the API server answered for replaced by its answer.

        What was read about the old objects (Pods, the proxy's answer) is dropped: the next plan
        asks again if it still needs it.
        """
        fresh = {ObjectRef.of(obj).key: obj for obj in answers}
        kept = tuple(obj for obj in self.objects if ObjectRef.of(obj).key not in fresh)
        objects = kept + tuple(fresh.values())
        return Observation(self.record, objects, self.secret, holders=self.holders, rendered=self.rendered)

    def rendered_by(self, step: Plan) -> Observation:
        """This reading with what `step` rendered on it kept for the next plan (`rendered`)."""
        if self.rendered is not None or not step.desired:
            return self
        return replace(self, rendered=step.desired)


@dataclass(frozen=True)
class Prefetched:
    """One endpoint's share of what its batch read for all its endpoints at once, for its first pass:
    its objects (one list per scope for the batch), when the batch's read answered for it its record
    (one BatchGetItem for the batch; `has_record` False: read it alone), and what holds each name the
    batch's lists saw (`Observation.holders`, shared by the batch's endpoints)."""

    objects: tuple[dict[str, Any], ...]
    record: EndpointRecord | None = None
    has_record: bool = False
    holders: Holders | None = None


def plan_of(name: str, seen: Observation, region: str, settings: RenderSettings) -> Plan:
    """The plan for `seen`.

    Raises:
        RuntimeError: the plan asks for a reading `seen` already holds (a planner fault: the
            gather-then-plan loop would not end).
    """
    digest = seen.secret.digest if seen.secret is not None else None
    pods = list(seen.pods) if seen.pods is not None else None
    step = plan(
        *(name, seen.record, region, seen.objects, settings, pods, seen.route),
        secret_digest=digest,
        rendered=seen.rendered,
    )
    if (step.needs_pods and seen.pods is not None) or (
        step.needs_route is not None and seen.route is not None
    ):
        raise RuntimeError(f"{name}: the plan asks again for a reading it was given ({step.reason})")
    return step


@dataclass(frozen=True)
class Rejected:
    """The pass ends the reconcile as terminal: `message` becomes the Region's `error` status."""

    message: str


@dataclass(frozen=True)
class Acted:
    """The pass applied or deleted objects per `step`; `next` is the observation the API server's
    answers make (None: observe afresh)."""

    step: Plan
    next: Observation | None


@dataclass(frozen=True)
class Planned:
    """The pass had nothing to act on in the cluster: `step` says what to write and whether done."""

    step: Plan


@dataclass(frozen=True)
class AwaitRoute:
    """The plan on `seen` asks what the proxy says of `route`, and the batch asks for every such
    route at once after its route changes are in their shards (`Reconciler._run_batch`)."""

    seen: Observation
    route: Route


PassResult = Rejected | Acted | Planned | AwaitRoute


@dataclass(frozen=True)
class ActResult:
    """What acting on a plan's deletes and applies did: the API server's answers to the applies,
    and the API server's refusal of one as a terminal reason (None: none refused)."""

    answers: tuple[dict[str, Any], ...] = ()
    rejected: str | None = None
