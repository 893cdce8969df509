"""What runs, as opposed to what was asked: each target Region's observed state and the aggregate.

A record's `desired_state` says what an operator asked (`deploying` stays until the next change:
it is never rewritten by the reconcilers), its `region_status` what each Region's reconciler last
saw. This module reads the two together, purely, into states a person or a script can act on:

- `running`: every replica the Region wants is ready (for the record's current lifecycle);
- `updating`: every replica is ready but the reconciler is not done (a rollout finishing, the
  proxies picking up the route): nothing is missing, so not `degraded`;
- `degraded`: some are ready, not all (a rollout under way, a replica lost);
- `error`: the Region's reconciler reported an error, with its reason;
- `pending`: nothing ready yet (no observation of this lifecycle, creating, updating from zero);
  before its reconciler counted, a Region wants the spec's replicas (so the aggregate of one Region
  running 1/1 and one pending reads `degraded 1/2`, not `1/1`);
- `stale`: the Region's observation is older than its bound (its reconciler no longer confirms
  it: `gco.reconcile.heartbeat.stale_after`); none of its replicas counts as ready, the reason says
  when it was last confirmed and what it said then;
- `stopped` / `stopping`: a stopped endpoint with no replica left / some still going; also
  `stopped` (with the reason `scaled to zero`) a live endpoint whose spec asks for 0 replicas and
  has none (it is not pending: nothing will come until it is scaled);
- `deleting`: the record is deleted and the Region has not acknowledged it yet; `deleted` once it
  has. A Region removed from a live endpoint (`regions --remove`) reads the same: `deleting` until
  its reconciler reports its objects gone for this lifecycle, then `deleted` (never `pending`).

The aggregate over the target Regions: `deleting`/`deleted` for a deleted record, else `error` if
any Region is in error, `stale` if every Region is, `running` if every Region runs, `updating` if
every Region runs or updates, `stopped` if every Region is stopped, `degraded` if any Region serves
(running, updating or degraded), else `pending`; a stale Region among others is named in the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from gco.endpoints.record import EndpointRecord, RegionStatus

ObservedState = Literal[
    "running",
    "updating",
    "degraded",
    "error",
    "pending",
    "stale",
    "stopped",
    "stopping",
    "deleting",
    "deleted",
]
OBSERVED_STATES: tuple[str, ...] = get_args(ObservedState)
SERVING = frozenset({"running", "updating", "degraded"})
# Status details the reconciler writes beside the totals (which count the canary too).
CANARY_READY, CANARY_DESIRED = "canary_ready", "canary_desired"
SCALED_TO_ZERO = "scaled to zero: the spec asks for 0 replicas"


@dataclass(frozen=True)
class Observed:
    """One Region's (or the aggregate's) observed state; `reason` says why when it is an error."""

    state: ObservedState
    ready: int = 0
    desired: int = 0
    reason: str = ""

    def __str__(self) -> str:
        counts = f" {self.ready}/{self.desired}" if self.desired or self.ready else ""
        return f"{self.state}{counts}" + (f" ({self.reason})" if self.reason else "")


def _wanted(record: EndpointRecord) -> int:
    """Replicas a Region will want of the spec before its reconciler counted any (the autoscaler's
    minimum where it scales, the canary's included)."""
    spec = record.spec
    base = spec.autoscaling.min_replicas if spec.autoscaling.enabled else spec.replicas
    return base + (spec.canary.replicas if spec.canary is not None else 0)


def in_region(record: EndpointRecord, region: str, stale: Mapping[str, str] | None = None) -> Observed:
    """What the Region's reconciler last saw of this lifecycle, as an `ObservedState`; `stale` names
    the Regions whose observation is past its bound (`stale_after`), with why."""
    status = record.region_status.get(region)
    if record.is_deleted:
        acknowledged = (
            status is not None
            and record.deletion_generation is not None
            and status.deletion_generation == record.deletion_generation
        )
        return Observed("deleted" if acknowledged else "deleting")
    if region not in record.target_regions:  # removed from a live endpoint: its reconciler cleans it
        cleaned = (
            status is not None and status.state == "deleted" and status.lifecycle_id == record.lifecycle_id
        )
        return Observed("deleted" if cleaned else "deleting")
    if stale and region in stale:
        # What it last said is no longer known to hold: none of its replicas counts as ready.
        said = f"; it said {status.state} {status.replicas_ready}/{status.replicas_desired}" if status else ""
        desired = status.replicas_desired if status else _wanted(record)
        return Observed("stale", 0, desired, stale[region] + said)
    if status is None or status.lifecycle_id != record.lifecycle_id:
        return Observed("pending", 0, 0 if record.desired_state == "stopped" else _wanted(record))
    ready, desired = status.replicas_ready, status.replicas_desired
    if status.state == "error":
        return Observed("error", ready, desired, status.error or "error")
    if record.desired_state == "stopped" or status.state in ("stopped", "stopping"):
        return Observed("stopped" if status.state == "stopped" and ready == 0 else "stopping", ready, desired)
    if status.state == "running" and ready >= desired > 0:
        return Observed("running", ready, desired)
    if desired == 0 and ready == 0 and (status.state == "running" or record.spec.replicas == 0):
        # Zero replicas asked (`replicas: 0`, or an autoscaler at its minimum of zero) and none
        # left: nothing is pending, nothing will come until the spec or the load changes.
        return Observed("stopped", 0, 0, SCALED_TO_ZERO)
    if ready >= desired > 0:
        # Every replica ready, the reconciler not done: a rollout finishing, or the proxies picking
        # up the route. Not `degraded` (nothing is missing): `updating`.
        return Observed("updating", ready, desired)
    if ready > 0:
        return Observed("degraded", ready, desired)
    return Observed("pending", ready, desired)


def per_region(record: EndpointRecord, stale: Mapping[str, str] | None = None) -> dict[str, Observed]:
    """Each target Region's observation (each deletion Region's, for a deleted record)."""
    regions = (
        (record.deletion_regions or record.cleanup_regions) if record.is_deleted else record.target_regions
    )
    return {region: in_region(record, region, stale) for region in regions}


def aggregate(record: EndpointRecord, stale: Mapping[str, str] | None = None) -> Observed:
    """The endpoint's observed state over its Regions (see the module docstring)."""
    regions = per_region(record, stale)
    seen = list(regions.values())
    ready, desired = sum(o.ready for o in seen), sum(o.desired for o in seen)
    if record.is_deleted:
        done = all(o.state == "deleted" for o in seen)
        return Observed("deleted" if done else "deleting")
    errors = [f"{region}: {o.reason}" for region, o in regions.items() if o.state == "error"]
    if errors:
        return Observed("error", ready, desired, "; ".join(errors))
    states = {o.state for o in seen}
    old = [region for region, o in regions.items() if o.state == "stale"]
    if seen and states == {"stale"}:
        return Observed("stale", ready, desired, "no Region's observation is fresh")
    note = f"stale: {', '.join(old)}" if old else ""
    if seen and states == {"running"}:
        return Observed("running", ready, desired)
    if seen and states <= {"running", "updating"}:
        return Observed("updating", ready, desired)
    if seen and states == {"stopped"}:
        reasons = {o.reason for o in seen}
        return Observed("stopped", ready, desired, reasons.pop() if len(reasons) == 1 else "")
    if states & {"stopping"}:
        return Observed("stopping", ready, desired, note)
    if states & SERVING:
        return Observed("degraded", ready, desired, note)
    return Observed("pending", ready, desired, note)


def matches(record: EndpointRecord, state: str, stale: Mapping[str, str] | None = None) -> bool:
    """Whether `list --state STATE` shows the record: its desired state or its observed aggregate is
    STATE (an endpoint deployed and running in every Region is listed under both `deploying`, what
    was asked, and `running`, what runs)."""
    return record.desired_state == state or aggregate(record, stale).state == state


def desired_shown(record: EndpointRecord) -> str:
    """The desired state as a person reads it. The stored `deploying` (written by deploy, update,
    scale and the canary commands, and never rewritten: docs/fencing.md) reads as "not done yet"
    once it is done; shown here as `running` when every Region said it runs it, `rolling out` before.
    What each Region last said decides, fresh or not: a Region gone silent after it ran the change is
    `stale` in the observed state, not a rollout still under way."""
    if record.desired_state != "deploying":
        return record.desired_state
    return "running" if aggregate(record).state == "running" else "rolling out"


def region_note(status: RegionStatus) -> str:
    """A Region's error, or why its replicas are not ready: `server exited 139 (SIGSEGV),
    CrashLoopBackOff, restarts 3` (the reason and restarts the reconciler read from the Pods)."""
    if status.error:
        return status.error
    extra = status.model_extra or {}
    if not extra.get("reason"):
        return ""
    return f"{extra['reason']}, restarts {extra.get('restarts') or 0}"
