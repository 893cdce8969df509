"""The choice of the serving Regions: ready, fresh, live, nearest first, residency held."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gco.endpoints import InvalidSpecError, parse_spec
from gco.endpoints.record import EndpointRecord
from gco.endpoints.serving import ServingRecord, parse_serving, serving_of
from gco.endpoints.spec import check_residency
from gco.endpoints.tokens import format_timestamp
from gco.global_access.routing import choose_regions, refusals, unavailable_message

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
LIFE = "l" * 64
REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]


def status(state: str = "running", ready: int = 1, age_s: float = 0.0, life: str = LIFE) -> dict[str, Any]:
    return {
        "state": state,
        "replicas_ready": ready,
        "replicas_desired": max(ready, 1),
        "last_sync": format_timestamp(NOW - timedelta(seconds=age_s)),
        "lifecycle_id": life,
    }


def record(
    statuses: dict[str, dict[str, Any]],
    *,
    desired: str = "running",
    targets: list[str] | None = None,
    residency: dict[str, Any] | None = None,
) -> ServingRecord:
    """The record's serving fields, which the stored item's plain reading must read alike."""
    spec: dict[str, Any] = {"image": "vllm/vllm-openai:v0.6.3"}
    if residency is not None:
        spec["residency"] = residency
    full = EndpointRecord(
        endpoint_name="smol",
        lifecycle_id=LIFE,
        desired_state=desired,
        target_regions=targets if targets is not None else list(REGIONS),
        spec=parse_spec(spec),
        region_status=statuses,
    )
    serving = serving_of(full)
    assert parse_serving(full.to_json()) == serving
    return serving


def test_here_first_then_the_nearest_first_order() -> None:
    rec = record({region: status() for region in REGIONS})
    order = ["us-west-2", "eu-west-1", "us-east-1"]
    assert choose_regions(rec, "eu-west-1", order, NOW, 60) == ["eu-west-1", "us-west-2", "us-east-1"]
    assert choose_regions(rec, None, order, NOW, 60) == order
    assert choose_regions(rec, None, [], NOW, 60) == REGIONS  # the record's target order after `order`


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (status(ready=0), "running with no ready replica"),
        (status(state="creating"), "its state is creating"),
        (status(state="error", ready=1), "its state is error"),
        (status(age_s=120), "its status is 120 s old (bound 60 s)"),
        (status(life="o" * 64), "its status is of an earlier lifecycle"),
    ],
)
def test_a_region_that_cannot_serve_is_left_out(bad: dict[str, Any], why: str) -> None:
    rec = record({"us-east-1": bad, "us-west-2": status()})
    assert choose_regions(rec, "us-east-1", REGIONS, NOW, 60) == ["us-west-2"]
    assert refusals(rec, NOW, 60)["us-east-1"] == why


def test_updating_with_a_ready_replica_still_serves() -> None:
    rec = record({"us-east-1": status(state="updating", ready=1)})
    assert choose_regions(rec, None, REGIONS, NOW, 60) == ["us-east-1"]


def test_no_staleness_bound() -> None:
    rec = record({"us-east-1": status(age_s=10**6)})
    assert choose_regions(rec, None, REGIONS, NOW, math.inf) == ["us-east-1"]


def test_a_region_that_is_not_a_target_never_serves() -> None:
    rec = record({r: status() for r in REGIONS}, targets=["us-east-1"])
    assert choose_regions(rec, "us-west-2", REGIONS, NOW, 60) == ["us-east-1"]


@pytest.mark.parametrize("desired", ["stopped", "deleted"])
def test_a_stopped_or_deleted_endpoint_is_served_nowhere(desired: str) -> None:
    rec = record({r: status() for r in REGIONS}, desired=desired)
    assert choose_regions(rec, None, REGIONS, NOW, 60) == []
    assert unavailable_message(rec, NOW, 60) == f"endpoint 'smol' is {desired}"


def test_residency_keeps_requests_in_its_regions_even_when_they_all_fail() -> None:
    residency = {"enabled": True, "regions": ["eu-west-1"]}
    rec = record({r: status() for r in REGIONS}, residency=residency)
    assert choose_regions(rec, "us-east-1", REGIONS, NOW, 60) == ["eu-west-1"]
    failing = record({**{r: status() for r in REGIONS}, "eu-west-1": status(ready=0)}, residency=residency)
    assert choose_regions(failing, "us-east-1", REGIONS, NOW, 60) == []
    message = unavailable_message(failing, NOW, 60)
    assert "resident" in message and "eu-west-1: running with no ready replica" in message
    assert "us-east-1" not in message


def test_residency_without_regions_means_the_targets() -> None:
    rec = record({r: status() for r in REGIONS}, targets=["us-east-1"], residency={"enabled": True})
    assert choose_regions(rec, "us-west-2", REGIONS, NOW, 60) == ["us-east-1"]


def test_residency_off_keeps_every_target() -> None:
    rec = record({r: status() for r in REGIONS}, residency={"enabled": False, "regions": ["eu-west-1"]})
    assert sorted(choose_regions(rec, None, [], NOW, 60)) == sorted(REGIONS)


def test_nobody_serving_names_every_region_and_why() -> None:
    rec = record({"us-east-1": status(ready=0)})
    message = unavailable_message(rec, NOW, 60)
    assert message.startswith("endpoint 'smol' is not served in any of its Regions (")
    assert "us-east-1: running with no ready replica" in message and "us-west-2: no status yet" in message


def test_residency_must_be_within_the_targets() -> None:
    spec = parse_spec({"image": "x:1", "residency": {"enabled": True, "regions": ["eu-west-1"]}})
    check_residency(spec, ["eu-west-1", "us-east-1"])
    with pytest.raises(InvalidSpecError) as caught:
        check_residency(spec, ["us-east-1"])
    assert caught.value.field == "spec.residency.regions"
    assert "eu-west-1 not among the target Regions (us-east-1)" in caught.value.message


@pytest.mark.parametrize(
    ("residency", "field"),
    [
        ({"enabled": True, "regions": ["moon-1"]}, "spec.residency.regions[0]"),
        ({"enabled": True, "regions": ["us-east-1", "us-east-1"]}, "spec.residency.regions"),
        ({"enabled": "yes"}, "spec.residency.enabled"),
        ({"enabled": True, "other": 1}, "spec.residency.other"),
    ],
)
def test_a_bad_residency_is_named(residency: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidSpecError) as caught:
        parse_spec({"image": "x:1", "residency": residency})
    assert caught.value.field == field
