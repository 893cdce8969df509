"""Names, tokens, the clock, the codec, expressions and the pure lifecycle planners."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gco.endpoints import InvalidSpecError, MalformedRecordError, names
from gco.endpoints.codec import from_item, to_attribute, to_item
from gco.endpoints.expressions import Expression
from gco.endpoints.lifecycle import ordered_union, plan_backfill, plan_target_regions
from gco.endpoints.record import EndpointRecord, parse_record
from gco.endpoints.tokens import MonotonicClock, format_timestamp, is_token, new_token, parse_timestamp

# -- names -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "chat", "llama-3-8b", "a" * names.ENDPOINT_NAME_MAX])
def test_good_endpoint_names(name: str) -> None:
    assert names.endpoint_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "Chat", "-a", "a-", "a_b", "a.b", "1chat", "a" * (names.ENDPOINT_NAME_MAX + 1), 5]
)
def test_bad_endpoint_names(name: Any) -> None:
    with pytest.raises(InvalidSpecError, match=r"^name: "):
        names.endpoint_name(name)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=70))
def test_endpoint_names_are_dns1123_labels(name: str) -> None:
    refused: InvalidSpecError | None = None
    try:
        names.endpoint_name(name)
    except InvalidSpecError as error:
        refused = error
    if refused is not None:
        assert refused.field == "name"
        return
    assert len(name) <= 63 and names.DNS1123_LABEL.match(name)


def test_regions_keep_first_seen_order_without_duplicates() -> None:
    assert names.region_list(["us-west-2", "us-east-1", "us-west-2"]) == ["us-west-2", "us-east-1"]
    assert names.region_list(["us-gov-west-1", "cn-north-1"]) == ["us-gov-west-1", "cn-north-1"]
    assert names.region_list([], allow_empty=True) == []
    with pytest.raises(InvalidSpecError, match="at least one"):
        names.region_list([])
    with pytest.raises(InvalidSpecError, match=r"target_regions\[1\]"):
        names.region_list(["us-east-1", "US-EAST-1"])
    with pytest.raises(InvalidSpecError, match="not a string"):
        names.region_list("us-east-1")


def test_namespaces_and_labels() -> None:
    assert names.namespace("gco-inference") == "gco-inference"
    for bad in ("", "Upper", "a" * 64):
        with pytest.raises(InvalidSpecError, match="namespace"):
            names.namespace(bad)
    assert names.labels({"app.kubernetes.io/name": "x", "team": ""}) == {
        "app.kubernetes.io/name": "x",
        "team": "",
    }
    for bad_labels in ({"": "x"}, {"Bad_Prefix!/x": "y"}, {"a/" + "b" * 64: "y"}, {"k": "v" * 64}, {"k": 5}):
        with pytest.raises(InvalidSpecError, match="labels"):
            names.labels(bad_labels)  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="mapping"):
        names.labels(["a"])  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError):
        names.label_key(3)  # type: ignore[arg-type]


# -- tokens and clock ------------------------------------------------------------------------------


def test_tokens_are_64_hex_from_the_csprng() -> None:
    tokens = {new_token() for _ in range(200)}
    assert len(tokens) == 200
    assert all(is_token(token) for token in tokens)
    assert not is_token("A" * 64) and not is_token("a" * 63) and not is_token(None)


def test_clock_never_repeats_or_goes_back() -> None:
    frozen = datetime(2026, 1, 1, tzinfo=UTC)
    clock = MonotonicClock(lambda: frozen)
    readings = [clock.now() for _ in range(5)]
    assert readings == sorted(set(readings))
    later = clock.after("2030-01-01T00:00:00.000000Z")
    assert later == "2030-01-01T00:00:00.000001Z"
    assert clock.after("not a timestamp") > later
    assert parse_timestamp(format_timestamp(frozen)) == frozen


# -- codec -----------------------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e125, max_value=1e125).filter(
        lambda value: value == 0 or abs(value) >= 1e-130
    )
)
def test_floats_round_trip_exactly(value: float) -> None:
    restored = from_item({"x": to_attribute(value)})["x"]
    # DynamoDB keeps the value, not the type: an integral float comes back as an int (the
    # typed models turn it back into the same float); anything else as the same float.
    assert float(restored) == value
    if not value.is_integer():
        assert isinstance(restored, float)
        assert math.copysign(1, restored) == math.copysign(1, value)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(10**37), max_value=10**37))
def test_ints_round_trip_as_ints(value: int) -> None:
    restored = from_item({"x": to_attribute(value)})["x"]
    assert isinstance(restored, int) and restored == value


def test_codec_refuses_what_dynamodb_cannot_hold() -> None:
    for bad in (math.nan, math.inf, 1e300, 1e-300):
        with pytest.raises(InvalidSpecError, match=r"spec\.x"):
            to_item({"spec": {"x": bad}})
    with pytest.raises(InvalidSpecError, match="38 digits"):
        to_attribute(10**40)
    with pytest.raises(InvalidSpecError, match="type"):
        to_attribute(object())
    nested = {"a": [1, 2.5, {"b": None, "c": True}], "d": "s", "e": (1,)}
    assert from_item(to_item(nested)) == {"a": [1, 2.5, {"b": None, "c": True}], "d": "s", "e": [1]}
    assert from_item({"b": {"B": b"xy"}, "ss": {"SS": ["a"]}}) == {"b": b"xy", "ss": ["a"]}
    # As the JSON protocol writes binaries (the table's answers reach the codec unparsed): base64 text.
    assert from_item({"b": {"B": "eHk="}, "bs": {"BS": ["eHk=", b"z"]}}) == {"b": b"xy", "bs": [b"xy", b"z"]}


def test_an_item_that_does_not_decode_is_one_error_naming_its_key_and_the_bad_value() -> None:
    key: dict[str, Any] = {"endpoint_name": {"S": "chat"}}
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({**key, "b": {"B": "not base64!"}}, "b", "'not base64!' is not base64"),
        ({**key, "spec": {"M": {"a": {"L": [{"S": "ok"}, {"Q": "1"}]}}}}, "spec.a[1]", "unknown DynamoDB"),
        ({**key, "port": {"N": "eighty"}}, "port", "'eighty' is not a number"),
        ({**key, "two": {"S": "a", "N": "1"}}, "two", "not an attribute value"),
        ({"plain": 5}, "plain", "not an attribute value"),
    ]
    for item, field, problem in cases:
        with pytest.raises(MalformedRecordError) as raised:
            from_item(item)
        assert (raised.value.field, raised.value.key) == (field, "chat" if "endpoint_name" in item else "?")
        assert problem in raised.value.problem


# -- expressions -----------------------------------------------------------------------------------


def test_expression_placeholders_keep_user_strings_out_of_the_grammar() -> None:
    expression = Expression()
    expression.equals("a", "v", "labels", "gco.dev/owner")
    expression.exists("b", "endpoint_name")
    expression.missing("c", "labels", "gco.dev/owner")
    expression.set(1, "spec", "replicas")
    request = expression.request()
    assert request["ConditionExpression"] == (
        "(#n0.#n1 = :v0) AND (attribute_exists(#n2)) AND (attribute_not_exists(#n0.#n1))"
    )
    assert request["UpdateExpression"] == "SET #n3.#n4 = :v1"
    assert request["ExpressionAttributeNames"]["#n1"] == "gco.dev/owner"
    assert expression.labels == ["a", "b", "c"]
    assert Expression().request() == {}


def test_expression_sends_only_the_placeholders_it_uses() -> None:
    expression = Expression()
    for index in range(12):
        expression.path(f"name{index}")
    expression.value("unused")
    expression.equals("x", 1, "name11")
    request = expression.request()
    assert request["ExpressionAttributeNames"] == {"#n11": "name11"}
    assert request["ExpressionAttributeValues"] == {":v1": {"N": "1"}}


# -- planners --------------------------------------------------------------------------------------


def record(**fields: Any) -> EndpointRecord:
    return parse_record({"endpoint_name": "ep", "spec": {"image": "x:1"}, **fields})


def tokens() -> Any:
    counter = iter(range(1000))
    return lambda: f"{next(counter):064x}"


def test_ordered_union() -> None:
    assert ordered_union(["b", "a"], ["a", "c"], ["b", "d"]) == ["b", "a", "c", "d"]


def test_plan_target_regions_mints_joining_tokens_only() -> None:
    snapshot = record(
        lifecycle_id="1" * 64,
        target_regions=["us-east-1", "us-west-2"],
        cleanup_regions=["us-east-1", "us-west-2", "eu-west-1"],
        region_generations={"us-east-1": "a" * 64, "us-west-2": "b" * 64, "eu-west-1": "c" * 64},
        region_status={"eu-west-1": {"state": "deleted", "region_generation": "c" * 64}},
    )
    seen: list[set[str]] = []

    def mint(taken: Any) -> str:
        seen.append(set(taken))
        return f"{len(seen):064x}"

    plan = plan_target_regions(snapshot, ["us-east-1", "eu-west-1", "ap-south-1"], ["sa-east-1"], mint)
    assert plan.joined == ["eu-west-1", "ap-south-1"] and plan.left == ["us-west-2"]
    assert plan.region_generations["us-east-1"] == "a" * 64
    assert plan.region_generations["us-west-2"] == "b" * 64  # kept for its removal's acknowledgement
    assert plan.region_generations["eu-west-1"] == f"{1:064x}"  # a re-joining Region: a new token
    assert plan.region_generations["ap-south-1"] == f"{2:064x}"
    # Every token the record holds, or was fenced with, is out of bounds for the mint.
    assert {"1" * 64, "a" * 64, "b" * 64, "c" * 64} <= seen[0]
    assert f"{1:064x}" in seen[1]
    assert plan.cleanup_regions == ["us-east-1", "us-west-2", "eu-west-1", "sa-east-1", "ap-south-1"]


def test_plan_backfill() -> None:
    legacy = record(
        desired_state="deleted",
        target_regions=["us-east-1"],
        cleanup_regions=["eu-west-1"],
        region_generations={"us-east-1": "a" * 64},
        region_status={"ap-south-1": {"state": "running"}},
        updated_at="2025-01-01T00:00:00.000000Z",
    )
    fields = plan_backfill(legacy, tokens(), "2026-01-01T00:00:00.000000Z")
    assert fields["cleanup_regions"] == ["eu-west-1", "us-east-1", "ap-south-1"]
    assert fields["region_generations"]["us-east-1"] == "a" * 64  # type: ignore[index]
    assert fields["deletion_regions"] == fields["cleanup_regions"]
    assert fields["created_at"] == "2025-01-01T00:00:00.000000Z"
    assert fields["ingress_path"] == "/inference/ep"


def test_record_model_helpers() -> None:
    deleted = record(
        lifecycle_id="1" * 64,
        desired_state="deleted",
        deletion_generation="g" * 64,
        deletion_regions=["us-east-1", "us-west-2"],
        region_status={
            "us-east-1": {"state": "deleted", "deletion_generation": "g" * 64},
            "us-west-2": {"state": "deleted", "deletion_generation": "old"},
        },
    )
    assert deleted.pending_deletion_regions() == ["us-west-2"]
    assert record().pending_deletion_regions() == []
    assert "replicas" in deleted.to_json()["spec"]
    with pytest.raises(MalformedRecordError, match=r"record 'ep' is unreadable: spec\.port") as bad:
        record(spec={"image": "x:1", "port": "80"})
    assert (bad.value.key, bad.value.field, bad.value.exit_code) == ("ep", "spec.port", 1)
