"""Names, numbers and text as a hostile caller would send them (no I/O)."""

from __future__ import annotations

import unicodedata
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gco.endpoints import InvalidSpecError, names
from gco.endpoints.codec import from_item, item_size, largest_field, to_item, value_size
from gco.endpoints.record import parse_record
from gco.endpoints.spec import parse_spec
from gco.endpoints.status_map import checked_details, one_line


@pytest.mark.parametrize(
    ("check", "value"),
    [
        (names.endpoint_name, "chat\n"),
        (names.namespace, "gco\n"),
        (names.region, "us-east-1\n"),
        (names.label_key, "team\n"),
        (names.label_value, "ml\n"),
        (names.label_key, "example.com\n/team"),
    ],
)
def test_a_trailing_newline_never_passes(check: Any, value: str) -> None:
    with pytest.raises(InvalidSpecError):
        check(value)


def test_regions_are_the_ones_botocore_knows_unless_new_ones_are_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert names.region("eu-central-2") == "eu-central-2"
    assert names.region("us-gov-west-1") == "us-gov-west-1"
    assert names.region("cn-northwest-1") == "cn-northwest-1"
    for bad, message in [
        ("zz-nowhere-9", "not a Region this gco knows"),
        ("us-east-" + "1" * 30, "at most 25 characters"),
        ("x" * 5005, "at most 25 characters"),
        ("US-EAST-1", "not an AWS Region name"),
        ("aws-global", "not an AWS Region name"),
        ("", "non-empty"),
    ]:
        with pytest.raises(InvalidSpecError, match=message):
            names.region(bad)
    assert names.region("us-newplace-3", allow_new=True) == "us-newplace-3"
    with pytest.raises(InvalidSpecError, match="fits no AWS partition"):
        names.region("zz-nowhere-9", allow_new=True)
    monkeypatch.setenv(names.ALLOW_NEW_REGIONS_ENV, "1")
    assert names.region("ap-newplace-7") == "ap-newplace-7"
    with pytest.raises(InvalidSpecError, match="at most 32"):
        names.region_list(["us-east-1"] * 200)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_free_text_holds_no_control_characters(value: str) -> None:
    refused: InvalidSpecError | None = None
    try:
        names.text(value, "created_by", max_length=20)
    except InvalidSpecError as error:
        refused = error
    if refused is not None:
        assert refused.field == "created_by" and "\n" not in str(refused)
        return
    # Accepted text stays on one line and holds nothing invisible that changes how it reads.
    assert len(value) <= 20 and len(value.splitlines()) <= 1
    assert not any(unicodedata.category(char) in {"Cc", "Cf", "Cs", "Zl", "Zp"} for char in value)
    assert names.first_unsafe(value) is None


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\u202e", "\u200b", "\x85", "\x1e"])
def test_free_text_refuses_line_breaks_and_invisible_format_characters(char: str) -> None:
    with pytest.raises(InvalidSpecError, match="created_by"):
        names.text(f"ab{char}cd", "created_by", max_length=20)
    assert names.text("a\xa0b", "created_by", max_length=20) == "a\xa0b"


def canonical(attribute: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB's number rule: leading and trailing zeros trimmed."""
    if "N" in attribute:
        return {"N": format(Decimal(attribute["N"]).normalize(), "f")}
    if "M" in attribute:
        return {"M": {key: canonical(value) for key, value in attribute["M"].items()}}
    if "L" in attribute:
        return {"L": [canonical(value) for value in attribute["L"]]}
    return attribute


targets = st.floats(min_value=1, max_value=100, allow_nan=False) | st.integers(1, 100).map(float)


@settings(max_examples=150, deadline=None)
@given(target=targets, depth=st.floats(min_value=0.001, max_value=1e9), replicas=st.integers(0, 1000))
def test_numbers_keep_their_model_type_through_dynamodb_normalisation(
    target: float, depth: float, replicas: int
) -> None:
    spec = parse_spec(
        {
            "image": "x:1",
            "replicas": replicas,
            "autoscaling": {
                "enabled": True,
                "min_replicas": 1,
                "max_replicas": 2,
                "metrics": [{"type": "cpu", "target": target}, {"type": "queue_depth", "target": depth}],
            },
        }
    )
    item = to_item({"endpoint_name": "ep", "spec": spec.model_dump(mode="json", exclude_none=True)})
    stored = {key: canonical(value) for key, value in item.items()}
    restored = parse_record(from_item(stored)).spec
    assert restored == spec
    assert [type(metric.target) for metric in restored.autoscaling.metrics] == [float, float]
    assert type(restored.replicas) is int


def test_item_size_follows_the_published_rules() -> None:
    assert value_size("abc") == 3
    assert value_size(True) == 1 and value_size(None) == 1
    assert value_size(12345) == 1 + 3  # 1 byte per two significant digits, plus one
    assert value_size([]) == 3 and value_size({"a": "bc"}) == 3 + 1 + 1 + 2
    assert item_size({"name": "x"}) == 4 + 1
    assert largest_field({"spec": {"env": {"A": "x" * 100, "B": "y" * 100}, "image": "i"}}) == "spec.env"
    assert largest_field({"spec": {"env": {"A": "x" * 1000}}}, "") == "spec.env.A"


def test_status_details_and_errors() -> None:
    assert checked_details(None) == {}
    assert checked_details({"attempt": 3, "note": "ok", "ready": False, "gone": None}) == {
        "attempt": 3,
        "note": "ok",
        "ready": False,
        "gone": None,
    }
    with pytest.raises(InvalidSpecError, match="details"):
        checked_details(["x"])  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="at most 256"):
        checked_details({"note": "x" * 300})
    assert one_line("a\nb\tc\x00d") == "a b c d"
