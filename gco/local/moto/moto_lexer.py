"""The local moto server's condition lexer, kept per expression text, and its parses, per template.

moto lexes each ConditionExpression token by token, trying a list of regular expressions at every
position, and parses the condition of a conditional UpdateItem twice (once to check the names and
values it uses, once to evaluate it). Profiled at 1,000 endpoints written at once, lexing was about
a twelfth of the server's CPU. The store sends a handful of distinct expression texts (its
conditions are templates; the values travel as placeholders), so the tokens of each text are kept
and each template is parsed once. DynamoDB itself parses in single-digit
milliseconds: this is the stand-in's cost, not the real system's.

A token is an immutable named tuple but for its `children` list, so each call gets its tokens with
fresh lists. Parsing is kept too, per *template* (`keep_parse_templates`): the text, the names and
the types of the values, parsed once with placeholders for the values, each call's tree a copy
with its values put in. After the direct dispatch (`moto_direct`) parsing was about a sixth of the
server's CPU at 1,000 endpoints written at once, although each call's condition was already
parsed once instead of twice (moto parses a conditional UpdateItem's condition twice: to check the
names and values it uses, and to evaluate it).
"""

from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Placeholder:
    """Where a value placeholder's value goes in a kept tree (`keep_parse_templates`)."""

    key: str


def keep_parse_templates(
    parse: Callable[[Any], Any],
    parser_class: Any,
    value_class: Any,
    node_classes: tuple[type, ...],
) -> Callable[[Any], Any]:
    """A replacement for `ConditionExpressionParser.parse` that parses each condition template once.

    A template is the text, the names and each value's type: the store's conditions differ from
    call to call only in their values (tokens, timestamps). The template is parsed with a
    `_Placeholder` for every value, and each call gets a copy of that tree with its own values in
    place (`value_class`, moto's `AttributeValue`, made afresh; the `node_classes`, moto's `Op` and
    `Func`, copied; anything else, such as attribute paths, shared: evaluating a tree changes
    none of it). What the parse found (names and values used) is handed to each call's parser, as
    moto's own parse would. A condition that does not parse is parsed by moto for every call, so it
    raises moto's own error.
    """
    kept: OrderedDict[str, tuple[Any, list[str], list[str]]] = OrderedDict()
    lock = threading.Lock()

    def bind(node: Any, values: dict[str, Any]) -> Any:
        if isinstance(node, value_class):
            held = node.value
            return value_class(values[held.key]) if isinstance(held, _Placeholder) else node
        if isinstance(node, list | tuple):
            return type(node)(bind(item, values) for item in node)
        if isinstance(node, node_classes):
            clone = object.__new__(type(node))
            clone.__dict__.update({name: bind(item, values) for name, item in vars(node).items()})
            return clone
        return node

    def template(self: Any) -> tuple[Any, list[str], list[str]] | None:
        values = self.expression_attribute_values or {}
        try:
            types = {key: sorted(value) for key, value in values.items()}
            key = json.dumps(
                [self.condition_expression, self.expression_attribute_names, types], sort_keys=True
            )
        except (TypeError, AttributeError):  # not the request's JSON: parse as moto does
            return None
        with lock:
            found = kept.get(key)
            if found is not None:
                kept.move_to_end(key)
                return found
        placeholders = {name: {kind: _Placeholder(name) for kind in value} for name, value in values.items()}
        shadow = parser_class(self.condition_expression, self.expression_attribute_names, placeholders)
        try:
            tree = parse(shadow)
        except Exception:  # moto's parse of the call's own values raises its error
            return None
        found = (tree, list(shadow.expr_attr_names_found), list(shadow.expr_attr_values_found))
        with lock:
            kept[key] = found
            while len(kept) > TOKEN_CACHE_SIZE:
                kept.popitem(last=False)
        return found

    def parse_template(self: Any) -> Any:
        found = template(self)
        if found is None:
            return parse(self)
        tree, names, values = found
        self.expr_attr_names_found.extend(names)
        self.expr_attr_values_found.extend(values)
        return bind(tree, self.expression_attribute_values or {})

    return parse_template


def install() -> None:  # pragma: no cover - runs in the moto server process
    """Keep this process's moto's lexed condition expressions and parsed templates (before it serves)."""
    from moto.dynamodb.comparisons import AttributeValue, ConditionExpressionParser, Func, Op

    ConditionExpressionParser._lex_condition_expression = keep_lexing(ConditionExpressionParser)
    ConditionExpressionParser.parse = keep_parse_templates(
        ConditionExpressionParser.parse, ConditionExpressionParser, AttributeValue, (Op, Func)
    )
