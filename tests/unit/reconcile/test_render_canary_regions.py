"""A canary limited to some Regions, and promoted (every request) in some of them: what each renders."""

from __future__ import annotations

from typing import Any

import pytest

from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.spec import parse_spec
from gco.reconcile.objects import CANARY_UPSTREAM_ANNOTATION, CANARY_WEIGHT_ANNOTATION
from gco.reconcile.render import render
from tests.unit.reconcile.records import EAST, IMAGE, WEST, make_record

CANARY_IMAGE = "vllm/vllm-openai:v0.6.4"


def canary(**fields: Any) -> dict[str, Any]:
    return {"canary": {"image": CANARY_IMAGE, "weight": 25, "replicas": 1, **fields}}


def rendered(record_spec: dict[str, Any], region: str) -> tuple[set[str], dict[str, str]]:
    objects = render(make_record(record_spec), region)
    deployments = {obj["metadata"]["name"] for obj in objects if obj["kind"] == "Deployment"}
    (route,) = [obj for obj in objects if obj["kind"] == "Ingress"]
    return deployments, route["metadata"]["annotations"]


def test_a_canary_runs_only_in_its_regions() -> None:
    spec = canary(regions=[EAST])
    east, east_route = rendered(spec, EAST)
    west, west_route = rendered(spec, WEST)
    assert east == {"llama", "llama--canary"} and east_route[CANARY_WEIGHT_ANNOTATION] == "25"
    assert west == {"llama"} and CANARY_UPSTREAM_ANNOTATION not in west_route
    everywhere, _ = rendered(canary(), WEST)
    assert everywhere == {"llama", "llama--canary"}  # without regions: every target Region, as before


def test_a_promoted_region_sends_every_request_to_the_canary() -> None:
    spec = canary(regions=[EAST, WEST], promoted_regions=[EAST])
    assert rendered(spec, EAST)[1][CANARY_WEIGHT_ANNOTATION] == "100"
    assert rendered(spec, WEST)[1][CANARY_WEIGHT_ANNOTATION] == "25"


def test_a_promoted_region_outside_the_canarys_regions_is_refused() -> None:
    with pytest.raises(InvalidSpecError, match="promoted_regions"):
        parse_spec({"image": IMAGE, **canary(regions=[EAST], promoted_regions=[WEST])})
    with pytest.raises(InvalidSpecError, match="regions"):
        parse_spec({"image": IMAGE, **canary(regions=["not a region"])})
