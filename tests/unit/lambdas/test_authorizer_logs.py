"""The authorizer's log lines are what its alarms count (`stacks/constructs/authorizer_alarms.py`): a 401
is a decision line whose effect field is `REFUSED` (taken out of the function's Errors), an Allow is a
decision line of another effect, and a decision it could not make is the failure line. The metric
filters' patterns are held against these names in `tests/cdk/test_global_address.py`; Lambda's JSON
log format writes a record's `extra` fields beside its message, so the record's attributes are the
fields the filters read."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gco.endpoints.serving import ServingRecord
from gco.global_access.authorizer import (
    DECISION_MESSAGE,
    EFFECT_FIELD,
    FAILURE_MESSAGE,
    REFUSED,
    Settings,
)
from gco.global_access.errors import KeyStoreError, UnauthorizedError
from gco.global_access.keys import ApiKey, new_key
from lambdas import authorizer

REGION = "us-east-1"
ARN = f"arn:aws:execute-api:{REGION}:111122223333:abc123/v1/POST/inference/smol/v1/completions"


class Unreadable:
    """Stands in for the tables (`authorizer_tables.DynamoTables`) when the keys replica cannot be
    read; it models nothing else."""

    def api_key(self, key_id: str) -> ApiKey | None:
        raise KeyStoreError(f"keys table unavailable reading {key_id}")

    def endpoint(self, name: str) -> ServingRecord | None:
        raise AssertionError("not reached: the key is read first")


def event(authorization: str | None) -> dict[str, Any]:
    headers = {} if authorization is None else {"Authorization": authorization}
    return {"type": "REQUEST", "methodArn": ARN, "path": "/inference/smol/x", "headers": headers}


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, Any]]:
    """(message, effect field or None) of each line the handler logged."""
    return [
        (record.getMessage(), getattr(record, EFFECT_FIELD, None))
        for record in caplog.records
        if record.name == authorizer.logger.name
    ]


@pytest.fixture
def unreadable(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(region=REGION, order=(REGION,))
    monkeypatch.setattr(authorizer, "_runtime", lambda: (settings, Unreadable()))


@pytest.mark.usefixtures("unreadable")
def test_a_401_is_a_decision_line_with_the_refused_effect(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger=authorizer.logger.name), pytest.raises(UnauthorizedError):
        authorizer.handler(event(None), None)
    assert lines(caplog) == [(DECISION_MESSAGE, REFUSED)]


@pytest.mark.usefixtures("unreadable")
def test_a_decision_it_could_not_make_is_the_failure_line(caplog: pytest.LogCaptureFixture) -> None:
    plaintext, _ = new_key("ci", ["*"], now=datetime(2026, 1, 1, tzinfo=UTC))
    with caplog.at_level("INFO", logger=authorizer.logger.name), pytest.raises(KeyStoreError):
        authorizer.handler(event(f"Bearer {plaintext}"), None)
    assert lines(caplog) == [(FAILURE_MESSAGE, None)]  # never counted as a refusal
