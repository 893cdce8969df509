"""Observed states: what runs per Region and in aggregate, from the record alone."""

from __future__ import annotations

from typing import Any

import pytest

from gco.endpoints import observed
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
    assert observed.aggregate(record).state == aggregate
    assert observed.matches(record, aggregate) and observed.matches(record, "deploying")
    assert not observed.matches(record, "stopped")


def test_an_error_names_its_region_and_reason() -> None:
    record = make_record(region_status={EAST: status("running", 1), WEST: status("error", error="no KEDA")})
    total = observed.aggregate(record)
    assert (total.state, total.reason) == ("error", f"{WEST}: no KEDA")
    assert str(observed.per_region(record)[WEST]) == "error 0/1 (no KEDA)"
    assert str(observed.per_region(record)[EAST]) == "running 1/1"


def test_stopped_and_deleted_records() -> None:
    stopping = make_record(
        desired_state="stopped", region_status={EAST: status("stopping", 1), WEST: status("stopped", 0, 0)}
    )
    assert observed.aggregate(stopping).state == "stopping"
    stopped = make_record(
        desired_state="stopped", region_status={EAST: status("stopped", 0, 0), WEST: status("stopped", 0, 0)}
    )
    assert observed.aggregate(stopped).state == "stopped"
    deleted = make_record(
        desired_state="deleted",
        deletion_generation=DELETION,
        deletion_regions=[EAST, WEST],
        region_status={EAST: {"state": "deleted", "deletion_generation": DELETION}},
    )
    assert {r: o.state for r, o in observed.per_region(deleted).items()} == {
        EAST: "deleted",
        WEST: "deleting",
    }
    assert observed.aggregate(deleted).state == "deleting"
