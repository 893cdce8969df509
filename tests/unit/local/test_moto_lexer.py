"""The local moto server's kept condition lexer gives moto's own tokens, lexing each text once, and its kept
parse templates judge items as moto's own parse does, parsing each template once."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import pytest
from moto.dynamodb.comparisons import AttributeValue, ConditionExpressionParser, Func, Op
from moto.dynamodb.models.dynamo_type import DynamoType, Item

from gco.endpoints import conditions
from gco.endpoints.expressions import Expression
from gco.local.moto.moto_lexer import keep_lexing, keep_parse_templates, kept_lexer


def _observation_condition() -> str:
    """The condition text of the store's most frequent write (a Region's status)."""
    expression = Expression()
    conditions.observation(expression, "us-east-1", "lifecycle-1", "3")
    text: str = expression.request()["ConditionExpression"]
    return text


EXPRESSIONS = (
    _observation_condition(),
    "attribute_not_exists(#pk)",
    "#lifecycle = :lifecycle AND (attribute_not_exists(#rs.#r) OR #rs.#r.#g < :gen)",
    "size(#a) > :n OR NOT begins_with(#b, :prefix)",
)


def _parser(text: str) -> ConditionExpressionParser:
    return ConditionExpressionParser(text, {}, {})


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_kept_tokens_are_moto_own_with_fresh_children(text: str) -> None:
    kept = keep_lexing(ConditionExpressionParser)
    expected = _parser(text)._lex_condition_expression()
    first, second = kept(_parser(text)), kept(_parser(text))
    assert list(first) == list(expected) == list(second)
    assert all(a.children is not b.children for a, b in zip(first, second, strict=True))


def test_each_text_is_lexed_once() -> None:
    calls: list[str] = []

    def lex(text: str) -> deque[Any]:
        calls.append(text)
        tokens: deque[Any] = _parser(text)._lex_condition_expression()
        return tokens

    lexed = kept_lexer(lex, ConditionExpressionParser.Node)
    for _ in range(3):
        lexed(EXPRESSIONS[0])
        lexed(EXPRESSIONS[1])
    assert calls == [EXPRESSIONS[0], EXPRESSIONS[1]]


def test_a_bad_expression_still_raises_and_is_not_kept() -> None:
    kept = keep_lexing(ConditionExpressionParser)
    for _ in range(2):
        with pytest.raises(ValueError, match="Cannot parse condition"):
            kept(_parser("#a = :b ~ :c"))


def _store_write(lifecycle: str, generation: str, now: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    """A Region status write's condition (text, names, values), as the store sends it."""
    expression = Expression()
    conditions.observation(expression, "us-east-1", lifecycle, generation)
    conditions.advancing(expression, now)
    request = expression.request()
    return (
        request["ConditionExpression"],
        request["ExpressionAttributeNames"],
        request["ExpressionAttributeValues"],
    )


def _item(lifecycle: str, generation: str, updated_at: str, state: str = "running") -> Item:
    return Item(
        DynamoType({"S": "ep"}),
        None,
        {
            "endpoint_name": {"S": "ep"},
            "lifecycle_id": {"S": lifecycle},
            "region_generations": {"M": {"us-east-1": {"S": generation}}},
            "desired_state": {"S": state},
            "cleanup_regions": {"SS": ["us-east-1"]},
            "updated_at": {"S": updated_at},
        },
    )


def _counted(calls: list[str]) -> Any:
    def parse(parser: ConditionExpressionParser) -> Any:
        calls.append(parser.condition_expression or "")
        return ConditionExpressionParser.parse(parser)

    return keep_parse_templates(parse, ConditionExpressionParser, AttributeValue, (Op, Func))


ITEMS = [
    _item("a" * 64, "b" * 64, "2026-01-01T00:00:00Z"),
    _item("a" * 64, "c" * 64, "2026-01-01T00:00:00Z"),  # another membership token
    _item("d" * 64, "b" * 64, "2026-01-01T00:00:00Z"),  # another lifecycle
    _item("a" * 64, "b" * 64, "2027-01-01T00:00:00Z"),  # written later than `now`
    _item("a" * 64, "b" * 64, "2026-01-01T00:00:00Z", state="deleted"),
]


@pytest.mark.parametrize(
    "fences", [("a" * 64, "b" * 64), ("a" * 64, "c" * 64), ("d" * 64, "b" * 64), ("e" * 64, "f" * 64)]
)
def test_a_kept_template_judges_every_item_as_moto_own_parse(fences: tuple[str, str]) -> None:
    calls: list[str] = []
    parse = _counted(calls)
    parse(ConditionExpressionParser(*_store_write("0" * 64, "1" * 64, "2026-06-01T00:00:00Z")))
    text, names, values = _store_write(*fences, "2026-06-01T00:00:00Z")
    kept = parse(ConditionExpressionParser(text, names, values))
    own = ConditionExpressionParser(text, names, values).parse()
    verdicts = [kept.expr(item) for item in ITEMS]
    assert verdicts == [own.expr(item) for item in ITEMS]
    assert len(calls) == 1  # one parse of the template, whatever the values
    if fences == ("a" * 64, "b" * 64):
        assert verdicts == [True, False, False, False, False]


def test_a_template_is_its_text_names_and_value_types_and_hands_over_what_it_found() -> None:
    calls: list[str] = []
    parse = _counted(calls)
    text, names = "#s = :s AND #n < :n", {"#s": "state", "#n": "n"}
    first = ConditionExpressionParser(text, names, {":s": {"S": "a"}, ":n": {"N": "1"}})
    second = ConditionExpressionParser(text, names, {":s": {"S": "b"}, ":n": {"N": "2"}})
    parse(first)
    parse(second)
    assert len(calls) == 1
    assert sorted(second.expr_attr_values_found) == sorted(first.expr_attr_values_found) == [":n", ":s"]
    assert sorted(second.expr_attr_names_found) == ["#n", "#s"]
    parse(ConditionExpressionParser(text, names, {":s": {"N": "1"}, ":n": {"N": "2"}}))  # a value's type
    parse(ConditionExpressionParser(text, {"#s": "other", "#n": "n"}, {":s": {"S": "a"}, ":n": {"N": "1"}}))
    assert len(calls) == 3
    # Concurrent calls share the template, never one call's values.
    trees: list[Any] = []
    workers = [
        threading.Thread(
            target=lambda v=v: trees.append(
                (v, parse(ConditionExpressionParser(text, names, {":s": {"S": v}, ":n": {"N": "5"}})))
            )
        )
        for v in ("x", "y", "z")
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for value, tree in trees:
        match = Item(DynamoType({"S": "k"}), None, {"state": {"S": value}, "n": {"N": "1"}})
        assert tree.expr(match) and len(calls) == 3


def test_a_condition_that_does_not_parse_raises_moto_own_error_every_time() -> None:
    parse = _counted([])
    for _ in range(2):
        with pytest.raises(KeyError):
            parse(ConditionExpressionParser("#a = :missing", {"#a": "a"}, {}))
