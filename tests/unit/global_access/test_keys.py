"""Bearer keys: the format, the stored record (hash only), the header parse and the check."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, field_validator

from gco.endpoints import names
from gco.endpoints.tokens import format_timestamp
from gco.errors import GcoInputError
from gco.global_access import keys
from gco.global_access.errors import BearerFormatError, KeyRecordError

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_a_new_key_has_the_format_and_its_record_only_its_hash() -> None:
    plaintext, record = keys.new_key("ci", ["smol"], now=NOW, created_by="alice")
    match = keys.KEY.fullmatch(plaintext)
    assert match is not None and match["key_id"] == record.key_id
    assert record.key_hash == keys.key_hash(plaintext) and len(record.key_hash) == 64
    assert plaintext not in json.dumps(record.to_dict())
    assert match["secret"] not in json.dumps(record.to_dict())
    assert (record.name, record.endpoints, record.created_by) == ("ci", ["smol"], "alice")
    assert record.created_at == format_timestamp(NOW) and record.revoked_at is None


def test_keys_differ() -> None:
    made = {keys.new_key("k", ["*"], now=NOW)[0] for _ in range(50)}
    assert len(made) == 50
    assert len({key[4:16] for key in made}) == 50


def test_parse_bearer_reads_the_id_and_key() -> None:
    plaintext, record = keys.new_key("k", ["*"], now=NOW)
    assert keys.parse_bearer(f"Bearer {plaintext}") == (record.key_id, plaintext)
    assert keys.parse_bearer(f"bearer  {plaintext} ") == (record.key_id, plaintext)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Basic dXNlcjpwdw==",
        "Bearer",
        "Bearer sk-secretvalue",
        "Bearer gco-XYZ-abc",
        "AWS4-HMAC-SHA256 Credential=x",
    ],
)
def test_parse_bearer_refuses_what_is_not_a_gco_key(header: str | None) -> None:
    with pytest.raises(BearerFormatError) as caught:
        keys.parse_bearer(header)
    assert "secretvalue" not in str(caught.value) and "dXNlcjpwdw" not in str(caught.value)


def test_a_refused_token_is_never_echoed() -> None:
    plaintext, _ = keys.new_key("k", ["*"], now=NOW)
    with pytest.raises(BearerFormatError) as caught:
        keys.parse_bearer(f"Bearer {plaintext}x")
    assert plaintext not in str(caught.value)


def test_verify_allows_the_key_in_its_scope() -> None:
    plaintext, record = keys.new_key("k", ["smol", "big"], now=NOW)
    verdict = keys.verify(plaintext, record, "smol", NOW)
    assert verdict.allowed and verdict.key_id == record.key_id and verdict.status == 200
    assert verdict.reason == ""


def test_verify_refuses_out_of_scope_with_403() -> None:
    plaintext, record = keys.new_key("k", ["smol"], now=NOW)
    verdict = keys.verify(plaintext, record, "other", NOW)
    assert (verdict.allowed, verdict.refusal, verdict.status) == (False, "out_of_scope", 403)


def test_all_endpoints_scope() -> None:
    plaintext, record = keys.new_key("k", ["*"], now=NOW)
    assert keys.verify(plaintext, record, "anything", NOW).allowed


def test_verify_refuses_a_wrong_secret_and_an_unknown_id_alike() -> None:
    plaintext, record = keys.new_key("k", ["*"], now=NOW)
    other, _ = keys.new_key("k", ["*"], now=NOW)
    wrong = keys.verify(other, record, "smol", NOW)
    unknown = keys.verify(plaintext, None, "smol", NOW)
    assert (wrong.refusal, unknown.refusal) == ("mismatch", "unknown")
    assert wrong.reason == unknown.reason and wrong.status == unknown.status == 401


def test_verify_refuses_a_revoked_key_from_its_revocation_on() -> None:
    plaintext, record = keys.new_key("k", ["*"], now=NOW)
    revoked = dataclasses.replace(record, revoked_at=format_timestamp(NOW))
    assert keys.verify(plaintext, revoked, "smol", NOW).refusal == "revoked"
    assert keys.verify(plaintext, revoked, "smol", NOW - timedelta(seconds=1)).allowed


@given(st.text(max_size=80))
def test_verify_never_allows_another_string(guess: str) -> None:
    plaintext, record = keys.new_key("k", ["*"], now=NOW)
    if guess != plaintext:
        assert not keys.verify(guess, record, "smol", NOW).allowed


def test_scope_input_is_checked() -> None:
    assert keys.check_scope([], True) == ["*"]
    assert keys.check_scope(["a", "b", "a"], False) == ["a", "b"]
    for endpoints, everything in (([], False), (["a"], True), (["Bad_Name"], False)):
        with pytest.raises(GcoInputError):
            keys.check_scope(endpoints, everything)


def test_key_name_and_id_are_checked() -> None:
    with pytest.raises(GcoInputError) as caught:
        keys.new_key("bad\nname", ["*"], now=NOW)
    assert caught.value.field == "name"
    with pytest.raises(GcoInputError):
        keys.new_key("k", ["*", "smol"], now=NOW)
    assert keys.check_key_id("0123456789ab") == "0123456789ab"
    for bad in ("0123456789AB", "0123", "gco-0123456789ab"):
        with pytest.raises(GcoInputError):
            keys.check_key_id(bad)


class FormerApiKey(BaseModel):
    """The pydantic model `ApiKey` was until 2026-12-05, kept as the reference of its rules: the
    dataclass must accept and refuse what it did (pydantic left the global authorizer's path)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key_id: Annotated[str, Field(pattern=r"^[0-9a-f]{12}$")]
    key_hash: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    name: Annotated[str, Field(min_length=1, max_length=keys.MAX_KEY_NAME)]
    endpoints: Annotated[list[str], Field(min_length=1, max_length=keys.MAX_SCOPED_ENDPOINTS)]
    created_at: str
    created_by: str | None = None
    revoked_at: str | None = None

    @field_validator("endpoints")
    @classmethod
    def _endpoints(cls, value: list[str]) -> list[str]:
        if keys.ALL_ENDPOINTS in value and value != [keys.ALL_ENDPOINTS]:
            raise ValueError("'*' cannot be listed with endpoint names")
        for name in value:
            if name != keys.ALL_ENDPOINTS:
                names.endpoint_name(name, "endpoints")
        return value


# Values of the wrong kind (JSON's and DynamoDB's: what a stored item can hold).
odd_value = st.one_of(
    st.none(), st.booleans(), st.integers(-1, 2), st.text(max_size=4), st.lists(st.text(max_size=2))
)


def mostly(valid: st.SearchStrategy[Any], *bad: Any) -> st.SearchStrategy[Any]:
    """`valid` six times in eight, else a value of the wrong kind or one of the field's `bad` ones."""
    wrong = st.sampled_from(bad) if bad else odd_value
    return st.integers(0, 7).flatmap(lambda draw: odd_value if draw == 0 else wrong if draw == 1 else valid)


TIME = "2026-01-02T03:04:05.000000Z"
endpoint = st.sampled_from(["smol", "llama", "smol", "llama", "*", "Bad_Name", "a--b", ""])
key_values = st.fixed_dictionaries(
    {
        "key_id": mostly(st.just("0123456789ab"), "0123456789AB", "0123456789a", "0123456789ab\n"),
        "key_hash": mostly(st.just("a" * 64), "A" * 64, "a" * 63, "g" * 64),
        "name": mostly(st.text(min_size=1, max_size=3), "", "n" * 128, "n" * 129),
        "endpoints": mostly(st.lists(endpoint, min_size=1, max_size=3), [], ["smol"] * 64, ["smol"] * 65),
        "created_at": mostly(st.just(TIME)),
    },
    optional={
        "created_by": mostly(st.none() | st.just("alice")),
        "revoked_at": mostly(st.none() | st.just(TIME)),
    },
).flatmap(lambda values: st.sampled_from([values] * 9 + [{**values, "other": "x"}]))


@settings(max_examples=500, deadline=None)
@given(key_values)
def test_a_stored_key_is_read_as_the_former_model_read_it(values: dict[str, Any]) -> None:
    try:
        former: dict[str, Any] | None = FormerApiKey.model_validate(values).model_dump()
    except (ValueError, GcoInputError):  # the model let an endpoint name's own error through
        former = None
    try:
        read: dict[str, Any] | None = keys.ApiKey.parse(values).to_dict()
    except KeyRecordError:
        read = None
    assert read == former


def test_a_bad_field_is_named() -> None:
    _, record = keys.new_key("k", ["smol"], now=NOW)
    values = record.to_dict()
    for field, bad, named in (
        ("key_id", "x", "key_id"),
        ("endpoints", ["smol", "Bad_Name"], "endpoints[1]"),
        ("endpoints", ["*", "smol"], "endpoints"),
        ("name", "", "name"),
        ("revoked_at", 5, "revoked_at"),
    ):
        with pytest.raises(KeyRecordError) as caught:
            keys.ApiKey.parse({**values, field: bad})
        assert caught.value.field == named
    with pytest.raises(KeyRecordError) as caught:
        keys.ApiKey.parse({**values, "secret": "x"})
    assert caught.value.field == "secret"
    with pytest.raises(KeyRecordError) as caught:
        keys.ApiKey.parse({name: value for name, value in values.items() if name != "created_at"})
    assert (caught.value.field, caught.value.message) == ("created_at", "is missing")
