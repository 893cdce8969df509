"""The local moto server's ConditionExpression lexer, kept per expression text, and its last parse.

moto lexes each ConditionExpression token by token, trying a list of regular expressions at every
position, and parses the condition of a conditional UpdateItem twice (once to check the names and
values it uses, once to evaluate it). Profiled at 1,000 endpoints written at once, lexing was about
a twelfth of the server's CPU. The store sends a handful of distinct expression texts (its
conditions are templates; the values travel as placeholders), so the tokens of each text are kept
and only the parsing that looks values up runs per call. DynamoDB itself parses in single-digit
milliseconds: this is the stand-in's cost, not the real system's.

Only lexing is kept across calls: moto's later steps put the placeholders' values into the tree. A
token is an immutable named tuple but for its `children` list, so each call gets its tokens with
fresh lists. Within a call, the second parse of the same condition (same text, names and values,
in the request's thread right after the first) reuses the first's tree (`keep_last_parse`): after
the direct dispatch (`moto_direct`), parsing was about a seventh of the server's CPU at 1,000
endpoints written at once. The tree is moto's operator objects, which evaluate an item without
changing themselves; the names and values a parse found are given to the second parser as well.
"""

from __future__ import annotations

import functools
import json
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

TOKEN_CACHE_SIZE = 256  # distinct expression texts kept: the store's conditions are a few dozen
Token = tuple[Any, Any, Any, Any]  # (nonterminal, kind, text, value): a lexed node without children


def kept_lexer(lex: Callable[[str], deque[Any]], node: Callable[..., Any]) -> Callable[[str], deque[Any]]:
    """`lex` (expression text -> deque of nodes) kept per text; `node` rebuilds a node from a token."""

    @functools.lru_cache(maxsize=TOKEN_CACHE_SIZE)
    def tokens(text: str) -> tuple[Token, ...]:
        return tuple((n.nonterminal, n.kind, n.text, n.value) for n in lex(text))

    def lexed(text: str) -> deque[Any]:
        return deque(node(*token, []) for token in tokens(text))

    return lexed


def keep_lexing(parser_class: Any) -> Callable[[Any], deque[Any]]:
    """A replacement for `parser_class._lex_condition_expression` that lexes each text once."""
    lex = parser_class._lex_condition_expression

    def lex_text(text: str) -> deque[Any]:
        parser = parser_class.__new__(parser_class)  # lexing reads only the text and class constants
        parser.condition_expression = text
        return lex(parser)  # type: ignore[no-any-return]

    lexed = kept_lexer(lex_text, parser_class.Node)

    def lex_condition_expression(self: Any) -> deque[Any]:
        return lexed(self.condition_expression)

    return lex_condition_expression


def keep_last_parse(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A replacement for `ConditionExpressionParser.parse` reusing, per thread, the last parse of the
    same text, names and values (compared as JSON: moto may hand either parser its own copy)."""
    last = threading.local()

    def parse_once(self: Any) -> Any:
        try:
            parts = [self.condition_expression, self.expression_attribute_names]
            key = json.dumps([*parts, self.expression_attribute_values], sort_keys=True)
        except TypeError:  # not the request's JSON: parse as moto does
            return parse(self)
        kept = getattr(last, "parse", None)
        if kept is not None and kept[0] == key:
            _, tree, names, values = kept
            self.expr_attr_names_found.extend(names)
            self.expr_attr_values_found.extend(values)
            return tree
        tree = parse(self)
        last.parse = (key, tree, list(self.expr_attr_names_found), list(self.expr_attr_values_found))
        return tree

    return parse_once


def install() -> None:  # pragma: no cover - runs in the moto server process
    """Keep this process's moto's lexed condition expressions and last parses (before it serves)."""
    from moto.dynamodb.comparisons import ConditionExpressionParser

    ConditionExpressionParser._lex_condition_expression = keep_lexing(ConditionExpressionParser)
    ConditionExpressionParser.parse = keep_last_parse(ConditionExpressionParser.parse)
