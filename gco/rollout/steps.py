"""A rollout, one bounded step at a time, over its ports: the fenced store, the traffic, the evidence.

- `begin`: reads the endpoint, refuses what cannot be rolled out, and gives the first Region a canary
  taking its share (`gco.endpoints.canary.set_canary` with `regions`);
- `step`: in the Region under way, either waits for the canary to serve (the reconciler counted it
  ready, and a request pinned to it is answered by it), or measures up to `blocks_per_step` blocks and
  looks after each (`decision.decide`). A promote verdict promotes the Region (the canary takes every
  request there) and gives the next wave's Region the canary, or, after the last wave, promotes the
  canary everywhere (`canary.promote`); a rollback or inconclusive verdict, or a canary that never
  served, removes the canary everywhere (`canary.rollback`): every Region is on the primary again and
  the Regions after it were never touched;
- `abort`: the same removal, for a caller that gives up (the state machine's Catch);
- `run`: `begin` and `step` until the outcome, as the CLI runs it in one process.

Every step that measured or decided writes the rollout's evidence (`evidence.py`); each verdict also
names that evidence on the record (`EndpointStore.set_rollout_evidence`). Each step first reads the
record afresh: a record of another lifecycle (deleted and re-created) or a deleted one ends the
rollout with `RolloutSupersededError`, writing nothing; an endpoint someone else stopped, scaled to
zero, or whose canary they removed or replaced ends it rolled back with a reason naming the change
(`changed_under`), within one step: this rollout's canary, if still there, removed; another's kept.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gco.endpoints import canary as canary_actions
from gco.endpoints import operations
from gco.endpoints.errors import EndpointError, NoCanaryError
from gco.endpoints.observed_state import CANARY_DESIRED, CANARY_READY
from gco.endpoints.operations import AdmissionHook
from gco.endpoints.record import EndpointRecord
from gco.endpoints.store import EndpointStore
from gco.evidence.record import now_iso
from gco.evidence.store import EvidenceStore
from gco.reconcile.proxy.routes import CANARY
from gco.rollout import blocks
from gco.rollout.decision import decide
from gco.rollout.errors import RolloutInputError, RolloutSupersededError
from gco.rollout.evidence import rollout_record
from gco.rollout.state import Outcome, RegionAnalysis, RolloutSettings, RolloutState
from gco.rollout.traffic import Traffic

NOT_SERVING = (404, 502, 503, 504)  # the proxy's answers while a version has no ready upstream
POLL_S = 2.0  # between readiness looks while the canary starts


@dataclass(frozen=True)
class Ports:
    """What a rollout acts through.

    Parameters:
        store: the fenced endpoint store.
        traffic: the analysis requests' sender.
        evidence: where each evidence record is written (a local directory, the S3 bucket).
        clock: seconds since the epoch (the readiness deadline is kept in the state as such).
        admit: the validation policy's check of the canary's image in each Region it reaches, written
            with the canary (`gco.endpoints.operations.AdmissionHook`; None: nothing checked).
    """

    store: EndpointStore
    traffic: Traffic
    evidence: Sequence[EvidenceStore]
    clock: Callable[[], float] = time.time
    admit: AdmissionHook | None = None


# The reason a rollout whose process was interrupted (SIGINT, or SIGTERM where the CLI turns it into
# one) ends with, on its evidence and the record.
INTERRUPTED = "the rollout was interrupted"


def _record(ports: Ports, state: RolloutState) -> EndpointRecord:
    record = operations.fresh(ports.store, state.settings.endpoint)
    if record.is_deleted or record.lifecycle_id != state.lifecycle_id:
        raise RolloutSupersededError(
            f"endpoint {state.settings.endpoint!r} is no longer the lifecycle the rollout began on"
        )
    return record


def check(record: EndpointRecord, settings: RolloutSettings) -> None:
    """Refuse what cannot be rolled out, before anything is written.

    Raises:
        RolloutInputError: the endpoint is stopped or deleted, disaggregated (mooncake), already has a
            canary, or already runs the image.
    """
    if record.desired_state not in ("deploying", "running"):
        raise RolloutInputError("NAME", f"{settings.endpoint} is {record.desired_state}, not running")
    if record.spec.mooncake is not None:
        raise RolloutInputError("NAME", f"{settings.endpoint} is disaggregated (mooncake): no canary")
    if record.spec.canary is not None:
        raise RolloutInputError("NAME", f"{settings.endpoint} already has a canary: promote or roll it back")
    if record.spec.image == settings.image:
        raise RolloutInputError("--image", f"{settings.endpoint} already runs {settings.image}")


def begin(settings: RolloutSettings, ports: Ports) -> RolloutState:
    """Give the first Region the canary and return the rollout's state.

    Raises:
        RolloutInputError: the endpoint is stopped, disaggregated (mooncake), already has a canary,
            or already runs the image.
        EndpointError: the endpoint cannot be read or written (not found, a lost race, ...).
    """
    record = operations.fresh(ports.store, settings.endpoint)
    check(record, settings)
    waves = record.target_regions if settings.waves else record.target_regions[:1]
    state = RolloutState(
        settings=settings,
        lifecycle_id=record.lifecycle_id or "",
        primary_image=record.spec.image,
        started_at=now_iso(),
        regions=[RegionAnalysis(region=region) for region in waves],
    )
    _start_wave(state, ports, 0)
    return state


def _start_wave(state: RolloutState, ports: Ports, index: int) -> None:
    settings = state.settings
    passed = state.passed()
    region = state.regions[index]
    canary_actions.set_canary(
        ports.store,
        settings.endpoint,
        settings.image,
        settings.weight,
        settings.replicas,
        regions=[*passed, region.region],
        promoted_regions=passed,
        admit=ports.admit,
    )
    region.phase = "waiting"
    region.ready_by = ports.clock() + settings.ready_timeout_s


def canary_counted_ready(record: EndpointRecord, region: str) -> bool:
    """Whether the Region's reconciler last counted every canary replica ready, in this lifecycle."""
    status = record.region_status.get(region)
    if status is None or status.lifecycle_id != record.lifecycle_id or status.state != "running":
        return False
    extra = status.model_extra or {}
    ready, desired = extra.get(CANARY_READY), extra.get(CANARY_DESIRED)
    return isinstance(ready, int) and isinstance(desired, int) and 0 < desired <= ready


def changed_under(record: EndpointRecord, state: RolloutState) -> str | None:
    """What someone else did to the endpoint since the rollout began that ends it (None: nothing): it
    was stopped, scaled to zero, or its canary removed or replaced. A deleted or re-created endpoint
    is `_record`'s (RolloutSupersededError)."""
    name = state.settings.endpoint
    if record.desired_state not in ("deploying", "running"):
        return f"{name} was {record.desired_state} during the rollout"
    if record.spec.replicas == 0:
        return f"{name} was scaled to zero during the rollout"
    canary = record.spec.canary
    if canary is None:
        return f"{name}'s canary ({state.settings.image}) was removed during the rollout"
    if canary.image != state.settings.image:
        return f"{name}'s canary was replaced during the rollout (now {canary.image})"
    return None


def step(state: RolloutState, ports: Ports) -> RolloutState:
    """One bounded step (module docstring); a state that is done is returned as it is.

    Raises:
        RolloutSupersededError: the endpoint was deleted or re-created since the rollout began.
        EndpointError: the store could not be read or written.
        EvidenceError: the evidence could not be written.
    """
    state = state.model_copy(deep=True)
    region = state.current()
    if state.done or region is None:
        return state
    record = _record(ports, state)
    changed = changed_under(record, state)
    if changed is not None:  # ended within one step of the change: nothing measured on what is not ours
        region.phase = "failed"
        return _finish(state, ports, "rolled_back", changed)
    if region.phase == "waiting":
        if canary_counted_ready(record, region.region):
            probe = ports.traffic.send(region.region, "canary")
            if probe.answered_by == CANARY and probe.status not in NOT_SERVING:
                region.phase = "analysing"
                return state
        if ports.clock() > (region.ready_by or 0):
            region.phase = "stalled"
            reason = (
                f"the canary did not serve in {region.region} within {state.settings.ready_timeout_s:g} s"
            )
            return _finish(state, ports, "rolled_back", reason)
        return state
    return _analyse(state, ports, region)


def _analyse(state: RolloutState, ports: Ports, region: RegionAnalysis) -> RolloutState:
    settings = state.settings
    for _ in range(settings.blocks_per_step):
        block, _samples = blocks.measure(
            lambda version: ports.traffic.send(region.region, version), settings.block_requests
        )
        region.blocks.append(block)
        region.decision = decide(region.blocks, settings.rule, seed=len(region.blocks))
        verdict = region.decision.verdict
        if verdict == "continue":
            continue
        if verdict == "promote":
            region.phase = "passed"
            index = state.regions.index(region)
            if index + 1 < len(state.regions):
                _start_wave(state, ports, index + 1)
                _written(state, ports, name_it=True)
                return state
            canary_actions.promote(ports.store, settings.endpoint)
            return _finish(state, ports, "promoted", f"{region.region}: {region.decision.reason}")
        region.phase = "failed" if verdict == "rollback" else "inconclusive"
        outcome: Outcome = "rolled_back" if verdict == "rollback" else "inconclusive"
        return _finish(state, ports, outcome, f"{region.region}: {region.decision.reason}")
    _written(state, ports, name_it=False)
    return state


def _finish(state: RolloutState, ports: Ports, outcome: Outcome, reason: str) -> RolloutState:
    if outcome != "promoted":
        remove_canary_of(ports.store, state.settings.endpoint, state.settings.image, state.lifecycle_id)
    state.outcome = outcome
    state.reason = reason
    _written(state, ports, name_it=True)
    return state


def remove_canary_of(store: EndpointStore, name: str, image: str, lifecycle_id: str) -> bool:
    """Remove the endpoint's canary if it is `image` on lifecycle `lifecycle_id` (a rollout's own);
    True when a canary was removed. Idempotent: a canary already gone, or another one (a newer
    rollout's, an operator's), is left as it is.

    Raises:
        EndpointError: the store could not be read or written.
    """
    record = operations.fresh(store, name)
    canary = record.spec.canary
    if record.is_deleted or record.lifecycle_id != lifecycle_id or canary is None or canary.image != image:
        return False
    with contextlib.suppress(NoCanaryError):  # gone meanwhile: every Region serves the primary
        canary_actions.rollback(store, name)
        return True
    return False


def _written(state: RolloutState, ports: Ports, *, name_it: bool) -> None:
    record = rollout_record(state)
    for store in ports.evidence:
        store.put(record)
    state.evidence_ids.append(record.id)
    if name_it:
        ports.store.set_rollout_evidence(state.settings.endpoint, record.id, state.lifecycle_id)


def abort(state: RolloutState, ports: Ports, reason: str) -> RolloutState:
    """End the rollout on the primary everywhere (idempotent): the canary removed, the outcome
    `rolled_back` with `reason`. A superseded or deleted endpoint is left as it is.

    Raises:
        EndpointError: the store could not be read or written.
        EvidenceError: the evidence could not be written.
    """
    state = state.model_copy(deep=True)
    if state.done:
        return state
    try:
        _record(ports, state)
    except RolloutSupersededError:
        state.outcome, state.reason = "rolled_back", f"{reason}; the endpoint was superseded"
        return state
    for region in state.regions:
        if region.phase in ("waiting", "analysing"):
            region.phase = "failed"
    return _finish(state, ports, "rolled_back", reason)


def run(
    settings: RolloutSettings,
    ports: Ports,
    *,
    sleep: Callable[[float], None] = time.sleep,
    on_step: Callable[[RolloutState], None] = lambda _: None,
) -> RolloutState:
    """`begin`, then `step` until the outcome; any failure on the way rolls back first (`abort`).

    Bounded: each Region's wait ends at its deadline, its analysis at `max_blocks`.

    Raises:
        RolloutInputError: as `begin`.
        RolloutSupersededError, EndpointError, EvidenceError: as `step` (after rolling back).
    """
    try:
        state = begin(settings, ports)
    except KeyboardInterrupt:  # perhaps after the canary was written: removed if it is this rollout's
        with contextlib.suppress(EndpointError):
            record = operations.fresh(ports.store, settings.endpoint)
            remove_canary_of(ports.store, settings.endpoint, settings.image, record.lifecycle_id or "")
        raise
    try:
        on_step(state)
        while not state.done:
            state = step(state, ports)
            on_step(state)
            current = state.current()
            if current is not None and current.phase == "waiting":
                sleep(POLL_S)
    except BaseException as error:  # an interrupt too: the endpoint is left on the primary
        abort(state, ports, INTERRUPTED if isinstance(error, KeyboardInterrupt) else "the rollout failed")
        raise
    return state
