"""The clause labels of every store write: the vocabulary of docs/fencing.md and the mutation checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gco.endpoints import conditions
from gco.endpoints.expressions import Expression
from tests.functional.endpoints.mutation_conditions import CATALOGUE, REVIEW

LID, GEN, TOKEN = "1" * 64, "2" * 64, "3" * 64
NOW = "2026-01-01T00:00:00.000000Z"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "fencing.md"


def labels_of(build: object, *args: object) -> list[str]:
    expression = Expression()
    build(expression, *args)  # type: ignore[operator]
    return expression.labels


@pytest.mark.parametrize(
    ("build", "args", "expected"),
    [
        (conditions.create, (), ["create.absent"]),
        (conditions.backfill, (None,), ["backfill.exists", "backfill.legacy", "backfill.snapshot"]),
        (conditions.backfill, (NOW,), ["backfill.exists", "backfill.legacy", "backfill.snapshot"]),
        (
            conditions.desired_state,
            ("deleted", LID, "running", ("owner", "a")),
            [
                "desired.exists",
                "desired.lifecycle",
                "desired.expected_state",
                "desired.label",
                "desired.not_deleted",
                "desired.fenced_record",
            ],
        ),
        (
            conditions.desired_state,
            ("stopped", LID, None, None),
            ["desired.exists", "desired.lifecycle", "desired.not_deleted"],
        ),
        (
            conditions.desired_state,
            ("deleted", None, None, None),
            ["desired.exists", "desired.not_deleted", "desired.fenced_record"],
        ),
        (conditions.start, (LID,), ["start.exists", "start.stopped", "start.lifecycle"]),
        (conditions.live, (LID, NOW), ["live.exists", "live.lifecycle", "live.not_deleted", "live.snapshot"]),
        (conditions.live, (LID, None), ["live.exists", "live.lifecycle", "live.not_deleted"]),
        (
            conditions.scale,
            (LID,),
            ["scale.exists", "scale.lifecycle", "scale.live", "scale.no_mooncake", "scale.not_autoscaled"],
        ),
        (
            conditions.observation,
            ("us-east-1", LID, TOKEN),
            [
                "status.exists",
                "status.lifecycle",
                "status.region_generation",
                "status.not_deleted",
                "status.member",
            ],
        ),
        (
            conditions.acknowledgement,
            ("us-east-1", GEN, LID),
            ["ack.lifecycle", "ack.deleted", "ack.generation", "ack.member", "ack.once"],
        ),
        (
            conditions.acknowledgement,
            ("us-east-1", GEN, None),
            ["ack.deleted", "ack.generation", "ack.member", "ack.once"],
        ),
        (
            conditions.purge,
            (GEN, ["us-east-1", "us-west-2"], LID, NOW),
            [
                "purge.deleted",
                "purge.generation",
                "purge.regions",
                "purge.acknowledged",
                "purge.acknowledged",
                "purge.lifecycle",
                "purge.snapshot",
            ],
        ),
        (
            conditions.purge,
            (GEN, ["us-east-1"], None, None),
            ["purge.deleted", "purge.generation", "purge.regions", "purge.acknowledged"],
        ),
        (conditions.advancing, (NOW,), ["clock.advances"]),
        (conditions.spec_change, (True,), ["spec.stopped"]),
        (conditions.spec_change, (False,), ["spec.not_stopped"]),
    ],
)
def test_each_write_carries_its_labelled_clauses(
    build: object, args: tuple[object, ...], expected: list[str]
) -> None:
    assert labels_of(build, *args) == expected


def test_the_catalogue_is_every_clause_and_the_docs_explain_each() -> None:
    source = (Path(conditions.__file__)).read_text(encoding="utf-8")
    found = set(re.findall(r'"([a-z]+\.[a-z_]+)"', source))
    assert found == set(CATALOGUE)
    assert len(REVIEW) == 27 and set(REVIEW) <= set(CATALOGUE)
    docs = DOCS.read_text(encoding="utf-8")
    for label in CATALOGUE:
        assert f"| `{label}`" in docs, f"docs/fencing.md does not explain {label}"


def test_clause_texts_reach_dynamodb_only_through_placeholders() -> None:
    expression = Expression()
    conditions.observation(expression, "us-east-1", LID, TOKEN)
    conditions.advancing(expression, NOW)
    request = expression.request()
    assert "us-east-1" not in request["ConditionExpression"] and LID not in request["ConditionExpression"]
    assert request["ConditionExpression"].count(" AND ") == 5
