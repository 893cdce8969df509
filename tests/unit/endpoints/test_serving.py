"""The serving fields read without the models (`gco.endpoints.serving`): the same answer as the models.

The property: for generated stored items (well-formed, malformed, and in forms the models coerce),
`parse_serving` gives what `serving_of(parse_record(item))` gives, and where the models refuse the
item, the same `MalformedRecordError` (field and problem). The items' other fields are well-formed,
so the models' refusals are all about serving fields.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gco.endpoints.record as record_module
from gco.endpoints import serving
from gco.endpoints.errors import MalformedRecordError
from gco.endpoints.names import MAX_REGIONS, partitions
from gco.endpoints.record import EndpointRecord, RegionStatus, parse_record
from gco.endpoints.serving import ServingRecord, ServingResidency, ServingStatus, parse_serving, serving_of
from gco.endpoints.spec import Residency
from gco.endpoints.states import DESIRED_STATES, REGION_STATES

LIFE = "l" * 64
REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]
# Region names the models refuse, or take only as a newer Region than botocore's list.
ODD_REGIONS = [
    *("moon-1", "", "US-EAST-1", "us-east-1\n", "us-east-1\u200b", "x" * 70, "us-newplace-9", "eu-west-9"),
]
SPEC = {"image": "vllm/vllm-openai:v0.6.3"}

# Values of the wrong kind, and kinds the models coerce (a bool or "1" for an int, bytes for a str).
odd = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 3),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
    st.just(2.0),
    st.sampled_from(["", "1", "running", "yes"]),
    st.binary(max_size=3),
    st.lists(st.sampled_from(REGIONS), max_size=2),
    st.dictionaries(st.sampled_from(["state", "x"]), st.integers(0, 2), max_size=1),
)


def mostly(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`valid` nine times in ten, else an odd value (`st.one_of` would flatten `odd`'s branches in
    beside `valid` and pick it rarely)."""
    return st.integers(0, 9).flatmap(lambda draw: odd if draw == 0 else valid)


region = st.integers(0, 3).flatmap(lambda draw: st.sampled_from(ODD_REGIONS if draw == 0 else REGIONS))
status = st.fixed_dictionaries(
    {"state": mostly(st.sampled_from(REGION_STATES))},
    optional={
        "replicas_ready": mostly(st.integers(0, 3)),
        "replicas_desired": mostly(st.integers(0, 3)),
        "last_sync": mostly(st.sampled_from(["2026-01-02T03:04:05.000000Z", "not a time"])),
        "lifecycle_id": mostly(st.sampled_from([LIFE, "o" * 64, None])),
        "region_generation": mostly(st.none() | st.just("3")),
        "error": mostly(st.none() | st.just("ImagePullBackOff")),
        "details": st.integers(),  # RegionStatus keeps fields it does not declare
    },
)
residency_fields = st.fixed_dictionaries(
    {}, optional={"enabled": mostly(st.booleans()), "regions": mostly(st.lists(region, max_size=4))}
)
# A field `Residency` does not declare, one time in ten (it forbids any).
residency = mostly(
    st.integers(0, 9).flatmap(
        lambda draw: (
            st.none()
            if draw < 2
            else residency_fields.map(lambda found: {**found, "other": 1} if draw == 2 else found)
        )
    )
)
item = st.fixed_dictionaries(
    {
        "endpoint_name": mostly(st.just("smol")),
        "spec": st.one_of(st.just(SPEC), residency.map(lambda found: {**SPEC, "residency": found})),
    },
    optional={
        "lifecycle_id": mostly(st.just(LIFE) | st.none()),
        "desired_state": mostly(st.sampled_from(DESIRED_STATES)),
        "target_regions": mostly(st.lists(st.sampled_from(REGIONS), max_size=3)),
        "region_status": mostly(st.dictionaries(st.sampled_from(REGIONS), status, max_size=3)),
        "namespace": st.just("default"),
    },
)


def outcome(read: Any, data: dict[str, Any]) -> ServingRecord | tuple[str, str]:
    try:
        answer: ServingRecord = read(data)
    except MalformedRecordError as error:
        return (error.field, error.problem)
    return answer


@settings(max_examples=600, deadline=None)
@given(item)
def test_the_plain_reading_answers_as_the_models(data: dict[str, Any]) -> None:
    by_models = outcome(lambda found: serving_of(parse_record(found)), data)
    assert outcome(parse_serving, data) == by_models


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {"enabled": mostly(st.booleans()), "regions": st.lists(region, min_size=1, max_size=4)}
    )
)
def test_the_plain_reading_of_a_residency_answers_as_the_models(found: dict[str, Any]) -> None:
    data = {**well_formed(), "spec": {**SPEC, "residency": found}}
    by_models = outcome(lambda read: serving_of(parse_record(read)), data)
    assert outcome(parse_serving, data) == by_models


def well_formed() -> dict[str, Any]:
    return {
        "endpoint_name": "smol",
        "lifecycle_id": LIFE,
        "desired_state": "running",
        "target_regions": ["us-east-1", "eu-west-1"],
        "spec": {**SPEC, "residency": {"enabled": True, "regions": ["eu-west-1"]}},
        "region_status": {
            "eu-west-1": {"state": "running", "replicas_ready": 2, "last_sync": "t", "lifecycle_id": LIFE}
        },
    }


def test_a_well_formed_item_is_read_without_the_models(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(data: dict[str, Any]) -> None:
        raise AssertionError("the models were asked")

    monkeypatch.setattr(record_module, "parse_record", refuse)
    assert parse_serving(well_formed()) == ServingRecord(
        endpoint_name="smol",
        lifecycle_id=LIFE,
        desired_state="running",
        target_regions=("us-east-1", "eu-west-1"),
        residency=ServingResidency(enabled=True, regions=("eu-west-1",)),
        region_status={"eu-west-1": ServingStatus("running", 2, "t", LIFE)},
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"replicas_ready": True}, 1),  # pydantic's lax int takes a bool; the plain reading never does
        ({"replicas_ready": "3"}, 3),
        ({"replicas_ready": 2.0}, 2),
    ],
)
def test_a_form_the_models_coerce_is_theirs_to_read(
    monkeypatch: pytest.MonkeyPatch, change: dict[str, Any], expected: int
) -> None:
    asked: list[str] = []
    real = record_module.parse_record

    def spy(data: dict[str, Any]) -> Any:
        asked.append(data["endpoint_name"])
        return real(data)

    monkeypatch.setattr(record_module, "parse_record", spy)
    data = well_formed()
    data["region_status"]["eu-west-1"].update(change)
    assert parse_serving(data).region_status["eu-west-1"].replicas_ready == expected
    assert asked == ["smol"]


def test_a_malformed_serving_field_is_refused_in_the_models_words() -> None:
    data = well_formed()
    data["spec"]["residency"]["regions"] = sorted(partitions()[0])[: MAX_REGIONS + 1]
    with pytest.raises(MalformedRecordError) as caught:
        parse_serving(data)
    assert caught.value.field == "spec.residency.regions"
    data = well_formed()
    data["region_status"]["eu-west-1"]["state"] = "sleeping"
    with pytest.raises(MalformedRecordError) as caught:
        parse_serving(data)
    assert caught.value.field == "region_status.eu-west-1.state"


def test_the_plain_reading_imports_no_pydantic() -> None:
    probe = (
        "import sys; from gco.endpoints.serving import parse_serving; "
        f"parse_serving({well_formed()!r}); "
        "assert not [name for name in sys.modules if name.split('.')[0] == 'pydantic'], 'pydantic loaded'"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)


def test_the_plain_reading_knows_every_field_of_the_models_it_reads() -> None:
    """A field added to `RegionStatus` or `Residency` must be added to the plain reading's checks too
    (else it would vouch for a status or residency whose new field the models refuse)."""
    declared = {"state", *serving.STATUS_INTEGERS, *serving.STATUS_OPTIONAL_TEXT}
    assert set(RegionStatus.model_fields) == declared
    assert set(Residency.model_fields) == serving.RESIDENCY_FIELDS
    read = {field.name for field in dataclasses.fields(ServingRecord)} - {"residency"}
    assert read <= set(EndpointRecord.model_fields)
    assert {field.name for field in dataclasses.fields(ServingStatus)} <= declared
