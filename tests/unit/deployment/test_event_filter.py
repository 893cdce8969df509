"""Lambda's event filter rules (gco.deployment.event_filter), on DynamoDB stream records.

The examples follow the Lambda developer guide's "Filter rule syntax" table and "Using event filtering
with a DynamoDB event source"; a stream record's images are in DynamoDB JSON (gco.endpoints.codec).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gco.deployment.event_filter import (
    EventFilterError,
    check_filters,
    check_pattern,
    check_stream_pattern,
    matches,
    passes,
)
from gco.endpoints.codec import to_item
from gco.rollout.service import REQUEST_ATTRIBUTE, STREAM_FILTER

# The pattern the starter shipped with: `exists` on the request's map, which Lambda never matches.
ON_THE_MAP = {"dynamodb": {"NewImage": {REQUEST_ATTRIBUTE: {"M": [{"exists": True}]}}}}


def stream_record(new: dict[str, Any] | None, event: str = "MODIFY") -> dict[str, Any]:
    image = {} if new is None else {"NewImage": to_item(new)}
    return {
        "eventName": event,
        "eventSource": "aws:dynamodb",
        "dynamodb": {"Keys": {"endpoint_name": {"S": "llama"}}, **image, "SizeBytes": 100},
    }


WITH_REQUEST = stream_record(
    {"endpoint_name": "llama", REQUEST_ATTRIBUTE: {"image": "repo@sha256:1", "waves": True}}
)
WITHOUT = stream_record({"endpoint_name": "llama", "desired_state": "running"})


def test_the_starter_filter_passes_a_record_with_a_request_and_no_other() -> None:
    assert passes(WITH_REQUEST, [STREAM_FILTER])
    assert not passes(WITHOUT, [STREAM_FILTER])
    assert not passes(stream_record(None, "REMOVE"), [STREAM_FILTER])
    # a request that is not a map (a string) is not a request
    assert not passes(
        stream_record({"endpoint_name": "x", REQUEST_ATTRIBUTE: "repo@sha256:1"}), [STREAM_FILTER]
    )
    check_stream_pattern(STREAM_FILTER)


def test_exists_on_a_map_matches_nothing_and_is_refused() -> None:
    assert not passes(WITH_REQUEST, [ON_THE_MAP])  # what Lambda did with the old filter
    with pytest.raises(
        EventFilterError, match=r"dynamodb\.NewImage\.rollout_request\.M: is a map of attributes"
    ):
        check_stream_pattern(ON_THE_MAP)
    # a matcher on the attribute's name itself (its value is an object of one type key)
    with pytest.raises(EventFilterError, match=r"NewImage\.desired_state: is an attribute value"):
        check_stream_pattern({"dynamodb": {"NewImage": {"desired_state": ["running"]}}})


def test_exists_false_holds_on_a_non_leaf_and_where_nothing_is() -> None:
    assert passes(WITH_REQUEST, [{"dynamodb": {"NewImage": {REQUEST_ATTRIBUTE: [{"exists": False}]}}}])
    assert passes(
        WITHOUT,
        [{"dynamodb": {"NewImage": {REQUEST_ATTRIBUTE: {"M": {"image": {"S": [{"exists": False}]}}}}}}],
    )
    assert not passes(
        WITH_REQUEST,
        [{"dynamodb": {"NewImage": {REQUEST_ATTRIBUTE: {"M": {"image": {"S": [{"exists": False}]}}}}}}],
    )


@pytest.mark.parametrize(
    ("matchers", "value", "expected"),
    [
        (["running"], "running", True),
        (["running", "deploying"], "deploying", True),  # an array is OR
        (["running"], "stopped", False),
        ([""], "", True),  # empty
        ([None], None, True),  # null
        ([None], "x", False),
        ([{"prefix": "us-"}], "us-east-1", True),
        ([{"prefix": "us-"}], "eu-west-1", False),
        ([{"suffix": ".png"}], "a.png", True),
        ([{"equals-ignore-case": "ALICE"}], "alice", True),
        ([{"anything-but": ["Raining"]}], "Sunny", True),
        ([{"anything-but": ["Raining"]}], "Raining", False),
        ([{"anything-but": {"prefix": "us-"}}], "us-west-2", False),
        ([{"numeric": [">", 0, "<=", 5]}], 5, True),
        ([{"numeric": [">", 0, "<=", 5]}], 0, False),
        ([{"numeric": ["=", 100]}], "100", False),  # a string is not a number
        ([100], 100.0, True),
        ([True], 1, False),  # a boolean is not the number 1
        (["a"], ["b", "a"], True),  # an array of leaves: any element
    ],
)
def test_leaf_matchers(matchers: list[Any], value: Any, expected: bool) -> None:
    check_pattern({"field": matchers})
    assert matches({"field": matchers}, {"field": value}) is expected


def test_keys_are_and_and_or_takes_either() -> None:
    pattern = {"eventName": ["MODIFY"], "dynamodb": {"NewImage": {"desired_state": {"S": ["running"]}}}}
    assert matches(pattern, WITHOUT)
    assert not matches({**pattern, "eventName": ["INSERT"]}, WITHOUT)
    either = {
        "$or": [{"eventName": ["INSERT"]}, {"dynamodb": {"NewImage": {"desired_state": {"S": ["running"]}}}}]
    }
    check_stream_pattern(either)
    assert matches(either, WITHOUT) and not matches(either, WITH_REQUEST)


def test_no_filters_pass_everything_and_any_filter_of_several_suffices() -> None:
    assert passes(WITHOUT, [])
    assert passes(WITHOUT, [STREAM_FILTER, {"eventName": ["MODIFY"]}])


@pytest.mark.parametrize(
    ("pattern", "field"),
    [
        ([], "pattern"),
        ({"a": "text"}, "a"),  # a leaf's matchers must be an array
        ({"a": []}, "a"),
        ({"a": [{"exists": "yes"}]}, "a"),
        ({"a": [{"wildcard": "*"}]}, "a"),  # EventBridge's, not Lambda's
        ({"a": [{"numeric": ["~", 1]}]}, "a"),
        ({"a": {"b": [["nested"]]}}, "a.b"),
        ({"$or": [{"a": ["x"]}]}, "$or"),
    ],
)
def test_patterns_lambda_refuses_name_the_path(pattern: Any, field: str) -> None:
    with pytest.raises(EventFilterError) as caught:
        check_pattern(pattern)
    assert caught.value.field == field


def test_a_mapping_s_filters_are_parsed_counted_and_sized() -> None:
    assert check_filters([json.dumps(STREAM_FILTER)]) == [STREAM_FILTER]
    with pytest.raises(EventFilterError, match="at most 5"):
        check_filters([json.dumps(STREAM_FILTER)] * 6)
    with pytest.raises(EventFilterError, match="4096"):
        check_filters([json.dumps({"a": ["x" * 4100]})])
    with pytest.raises(EventFilterError, match=r"Filters\[0\]\.Pattern: not JSON"):
        check_filters(["{"])
    with pytest.raises(EventFilterError, match="not a DynamoDB attribute type"):
        check_filters([json.dumps({"dynamodb": {"NewImage": {"a": {"Q": ["x"]}}}})])
