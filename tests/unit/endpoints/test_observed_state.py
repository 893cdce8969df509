"""Observed states: what runs per Region and in aggregate, from the record alone."""

from __future__ import annotations

from typing import Any

import pytest

from gco.endpoints import observed_state
from tests.unit.reconcile.records import DELETION, EAST, LIFECYCLE, OTHER_LIFECYCLE, WEST, make_record


def status(state: str, ready: int = 0, desired: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "state": state,
        "replicas_ready": ready,
        "replicas_desired": desired,
        "lifecycle_id": LIFECYCLE,
        **extra,
    }


@pytest.mark.parametrize(
    ("east", "west", "aggregate"),
    [
        (status("running", 1), status("running", 1), "running"),
        (status("running", 1), None, "degraded"),
        (status("running", 1), status("creating"), "degraded"),
        (status("updating", 1, 2), status("running", 1), "degraded"),
        (status("creating"), None, "pending"),
        (status("running", 1), status("error", error="Deployment x is held by endpoint y"), "error"),
        (status("running", 1), {**status("running", 1), "lifecycle_id": OTHER_LIFECYCLE}, "degraded"),
    ],
)
def test_the_aggregate_says_what_runs(
    east: dict[str, Any] | None, west: dict[str, Any] | None, aggregate: str
) -> None:
    statuses = {region: value for region, value in ((EAST, east), (WEST, west)) if value is not None}
    record = make_record(desired_state="deploying", region_status=statuses)
    assert observed_state.aggregate(record).state == aggregate
    assert observed_state.matches(record, aggregate) and observed_state.matches(record, "deploying")
    assert not observed_state.matches(record, "stopped")


def test_an_error_names_its_region_and_reason() -> None:
    record = make_record(region_status={EAST: status("running", 1), WEST: status("error", error="no KEDA")})
    total = observed_state.aggregate(record)
    assert (total.state, total.reason) == ("error", f"{WEST}: no KEDA")
    assert str(observed_state.per_region(record)[WEST]) == "error 0/1 (no KEDA)"
    assert str(observed_state.per_region(record)[EAST]) == "running 1/1"


def test_stopped_and_deleted_records() -> None:
    stopping = make_record(
        desired_state="stopped", region_status={EAST: status("stopping", 1), WEST: status("stopped", 0, 0)}
    )
    assert observed_state.aggregate(stopping).state == "stopping"
    stopped = make_record(
        desired_state="stopped", region_status={EAST: status("stopped", 0, 0), WEST: status("stopped", 0, 0)}
    )
    assert observed_state.aggregate(stopped).state == "stopped"
    deleted = make_record(
        desired_state="deleted",
        deletion_generation=DELETION,
        deletion_regions=[EAST, WEST],
        region_status={EAST: {"state": "deleted", "deletion_generation": DELETION}},
    )
    assert {r: o.state for r, o in observed_state.per_region(deleted).items()} == {
        EAST: "deleted",
        WEST: "deleting",
    }
    assert observed_state.aggregate(deleted).state == "deleting"


def test_a_removed_region_does_not_show_observed_pending() -> None:
    removing = make_record(
        target_regions=[EAST], region_status={EAST: status("running", 1), WEST: status("running", 1)}
    )
    assert observed_state.in_region(removing, WEST).state == "deleting"
    assert observed_state.in_region(removing, WEST).state != "pending"
    gone = make_record(
        target_regions=[EAST], region_status={EAST: status("running", 1), WEST: status("deleted", 0, 0)}
    )
    assert observed_state.in_region(gone, WEST).state == "deleted"
    never = make_record(target_regions=[EAST], region_status={EAST: status("running", 1)})
    assert observed_state.in_region(never, WEST).state == "deleting"  # its reconciler has not reported yet
    assert observed_state.aggregate(gone).state == "running"  # over the target Regions only


def test_degraded_3_3_is_wrong_every_replica_ready_reads_updating() -> None:
    record = make_record(target_regions=[EAST], region_status={EAST: status("updating", 3, 3)})
    assert str(observed_state.in_region(record, EAST)) == "updating 3/3"
    assert str(observed_state.aggregate(record)) == "updating 3/3"
    both = make_record(region_status={EAST: status("running", 3, 3), WEST: status("updating", 3, 3)})
    assert observed_state.aggregate(both).state == "updating"
    # A Region not yet counted wants the spec's replicas: one running, one pending is 1 of 2, not 1/1.
    half = make_record(region_status={EAST: status("running", 1)})
    assert str(observed_state.aggregate(half)) == "degraded 1/2"


def test_desired_state_deploying_on_a_running_endpoint_reads_as_what_it_is() -> None:
    running = make_record(
        desired_state="deploying", region_status={EAST: status("running", 1), WEST: status("running", 1)}
    )
    assert running.desired_state == "deploying"  # the stored value is unchanged
    assert observed_state.desired_shown(running) == "running"
    rolling = make_record(desired_state="deploying", region_status={EAST: status("running", 1)})
    assert observed_state.desired_shown(rolling) == "rolling out"
    stopped = make_record(desired_state="stopped")
    assert observed_state.desired_shown(stopped) == "stopped"


def test_a_region_gone_stale_after_the_change_is_not_a_rollout_under_way() -> None:
    """Both Regions said they run the change, then WEST went silent: its observation is `stale`, and
    the deploy reads as done (`running`), not `rolling out`."""
    record = make_record(
        desired_state="deploying", region_status={EAST: status("running", 1), WEST: status("running", 1)}
    )
    stale = {WEST: "last confirmed 2 min ago"}
    assert observed_state.aggregate(record, stale).state != "running"  # the observed column says stale
    assert observed_state.desired_shown(record) == "running"


def test_a_stale_region_is_shown_stale_and_named_in_the_aggregate() -> None:
    record = make_record(region_status={EAST: status("running", 1), WEST: status("running", 1)})
    stale = {WEST: "last confirmed 2 min ago"}
    assert str(observed_state.in_region(record, WEST, stale)) == (
        "stale 0/1 (last confirmed 2 min ago; it said running 1/1)"
    )
    total = observed_state.aggregate(record, stale)
    assert (total.state, total.reason) == ("degraded", f"stale: {WEST}")
    assert observed_state.aggregate(record, {EAST: "x", WEST: "y"}).state == "stale"
    assert observed_state.matches(record, "stale", {EAST: "x", WEST: "y"})
