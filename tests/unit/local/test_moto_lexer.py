"""The local moto server's kept condition lexer gives moto's own tokens, lexing each text once."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import pytest
from moto.dynamodb.comparisons import ConditionExpressionParser

from gco.endpoints import conditions
from gco.endpoints.expressions import Expression
from gco.local.moto_lexer import keep_last_parse, keep_lexing, kept_lexer


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


def _counted_parse(calls: list[str]) -> Any:
    def parse(parser: ConditionExpressionParser) -> Any:
        calls.append(parser.condition_expression or "")
        return ConditionExpressionParser.parse(parser)

    return keep_last_parse(parse)


def test_the_second_parse_of_one_condition_reuses_the_first_with_what_it_found() -> None:
    calls: list[str] = []
    parse = _counted_parse(calls)
    text, names, values = (
        "#s = :s AND #n < :n",
        {"#s": "state", "#n": "n"},
        {":s": {"S": "a"}, ":n": {"N": "1"}},
    )
    first, second = (ConditionExpressionParser(text, dict(names), dict(values)) for _ in range(2))
    tree = parse(first)
    assert parse(second) is tree and len(calls) == 1
    assert (second.expr_attr_names_found, second.expr_attr_values_found) == (
        first.expr_attr_names_found,
        first.expr_attr_values_found,
    )
    assert sorted(second.expr_attr_values_found) == [":n", ":s"]
    other = ConditionExpressionParser(text, names, {":s": {"S": "b"}, ":n": {"N": "1"}})
    assert parse(other) is not tree and len(calls) == 2  # other values: parsed again
    elsewhere: list[Any] = []
    thread = threading.Thread(
        target=lambda: elsewhere.append(parse(ConditionExpressionParser(text, names, values)))
    )
    thread.start()
    thread.join()
    assert elsewhere[0] is not tree and len(calls) == 3  # each thread keeps its own last parse
