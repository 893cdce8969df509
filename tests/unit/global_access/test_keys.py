"""Bearer keys: the format, the stored record (hash only), the header parse and the check."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gco.endpoints.tokens import format_timestamp
from gco.errors import GcoInputError
from gco.global_access import keys
from gco.global_access.errors import BearerFormatError

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
