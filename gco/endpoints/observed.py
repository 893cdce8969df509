"""What runs, as opposed to what was asked: each target Region's observed state and the aggregate.

A record's `desired_state` says what an operator asked (`deploying` stays until the next change:
it is never rewritten by the reconcilers), its `region_status` what each Region's reconciler last
saw. This module reads the two together, purely, into states a person or a script can act on:

- `running`: every replica the Region wants is ready (for the record's current lifecycle);
- `degraded`: some are ready, not all (a rollout under way, a replica lost);
- `error`: the Region's reconciler reported an error, with its reason;
- `pending`: nothing ready yet (no observation of this lifecycle, creating, updating from zero);
- `stopped` / `stopping`: a stopped endpoint with no replica left / some still going; also
  `stopped` (with the reason `scaled to zero`) a live endpoint whose spec asks for 0 replicas and
  has none (it is not pending: nothing will come until it is scaled);
- `deleting`: the record is deleted and the Region has not acknowledged it yet; `deleted` once it has.

The aggregate over the target Regions: `deleting`/`deleted` for a deleted record, else `error` if
any Region is in error, `running` if every Region runs, `stopped` if every Region is stopped,
`degraded` if any Region serves (running or degraded), else `pending`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from gco.endpoints.record import EndpointRecord, RegionStatus

ObservedState = Literal[
    "running", "degraded", "error", "pending", "stopped", "stopping", "deleting", "deleted"
]
OBSERVED_STATES: tuple[str, ...] = get_args(ObservedState)
SERVING = frozenset({"running", "degraded"})
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


def in_region(record: EndpointRecord, region: str) -> Observed:
    """What the Region's reconciler last saw of this lifecycle, as an `ObservedState`."""
    status = record.region_status.get(region)
    if record.is_deleted:
        acknowledged = (
            status is not None
            and record.deletion_generation is not None
            and status.deletion_generation == record.deletion_generation
        )
        return Observed("deleted" if acknowledged else "deleting")
    if status is None or status.lifecycle_id != record.lifecycle_id:
        return Observed("pending")
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
    if ready > 0:
        return Observed("degraded", ready, desired)
    return Observed("pending", ready, desired)


def per_region(record: EndpointRecord) -> dict[str, Observed]:
    """Each target Region's observation (each deletion Region's, for a deleted record)."""
    regions = (
        (record.deletion_regions or record.cleanup_regions) if record.is_deleted else record.target_regions
    )
    return {region: in_region(record, region) for region in regions}


def aggregate(record: EndpointRecord) -> Observed:
    """The endpoint's observed state over its Regions (see the module docstring)."""
    regions = per_region(record)
    seen = list(regions.values())
    ready, desired = sum(o.ready for o in seen), sum(o.desired for o in seen)
    if record.is_deleted:
        done = all(o.state == "deleted" for o in seen)
        return Observed("deleted" if done else "deleting")
    errors = [f"{region}: {o.reason}" for region, o in regions.items() if o.state == "error"]
    if errors:
        return Observed("error", ready, desired, "; ".join(errors))
    states = {o.state for o in seen}
    if seen and states == {"running"}:
        return Observed("running", ready, desired)
    if seen and states == {"stopped"}:
        return Observed("stopped", ready, desired)
    if states & {"stopping"}:
        return Observed("stopping", ready, desired)
    if states & SERVING:
        return Observed("degraded", ready, desired)
    return Observed("pending", ready, desired)


def matches(record: EndpointRecord, state: str) -> bool:
    """Whether `list --state STATE` shows the record: its desired state or its observed aggregate is
    STATE (an endpoint deployed and running in every Region is listed under both `deploying`, what
    was asked, and `running`, what runs)."""
    return record.desired_state == state or aggregate(record).state == state


def region_note(status: RegionStatus) -> str:
    """A Region's error, or why its replicas are not ready: `server exited 139 (SIGSEGV),
    CrashLoopBackOff, restarts 3` (the reason and restarts the reconciler read from the Pods)."""
    if status.error:
        return status.error
    extra = status.model_extra or {}
    if not extra.get("reason"):
        return ""
    return f"{extra['reason']}, restarts {extra.get('restarts') or 0}"
