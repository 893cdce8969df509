"""Object names of endpoints: no valid endpoint's objects can be named like another's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gco.endpoints import names
from gco.endpoints.errors import InvalidSpecError
from gco.reconcile.render import render
from tests.unit.reconcile.records import EAST, make_record

ENDPOINT_NAMES = st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True).filter(
    lambda value: names.ROLE_SEPARATOR not in value
)
ROLES = st.sampled_from(names.OBJECT_ROLES)


@given(ENDPOINT_NAMES, ROLES, ENDPOINT_NAMES, ROLES)
def test_role_object_names_are_distinct_and_never_an_endpoint_name(a: str, r: str, b: str, s: str) -> None:
    assert names.endpoint_name(a) == a
    with pytest.raises(InvalidSpecError):
        names.endpoint_name(names.object_name(a, r))  # never a valid endpoint name: no collision
    if (a, r) != (b, s):
        assert names.object_name(a, r) != names.object_name(b, s)


def test_the_longest_name_still_fits_a_service_name() -> None:
    longest = "a" * names.ENDPOINT_NAME_MAX
    assert max(len(names.object_name(longest, role)) for role in names.OBJECT_ROLES) == 63
    with pytest.raises(InvalidSpecError, match="at most 54"):
        names.endpoint_name(longest + "a")


@pytest.mark.parametrize("name", ["x--canary", "a--b", "col--prefill"])
def test_a_name_holding_the_role_separator_is_refused(name: str) -> None:
    with pytest.raises(InvalidSpecError, match="'--'"):
        names.endpoint_name(name)


def test_an_endpoint_named_like_a_canary_renders_no_object_of_the_other_endpoints_canary() -> None:
    """`col` with a canary and `col-canary`: the two endpoints' objects share no (kind, name)."""
    col = render(
        make_record(
            {"canary": {"image": "vllm/vllm-openai:v0.6.4", "weight": 50}},
            endpoint_name="col",
            ingress_path="/inference/col",
        ),
        EAST,
    )
    other = render(make_record(endpoint_name="col-canary", ingress_path="/inference/col-canary"), EAST)
    keys = {(obj["kind"], obj["metadata"]["name"]) for obj in col}
    assert ("Deployment", "col--canary") in keys
    assert not keys & {(obj["kind"], obj["metadata"]["name"]) for obj in other}
