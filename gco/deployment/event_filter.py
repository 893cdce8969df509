"""Lambda event filtering: which records an event source mapping's `FilterCriteria` lets through.

The stacks check every filter of a DynamoDB stream mapping at synth (`check_stream_pattern`), and the
local stack applies the synthesized mapping's filters to each stream record (`passes`) before a
batch reaches the function, as Lambda does. The rules are the Lambda developer guide's, "Control
which events Lambda sends to your function" (docs.aws.amazon.com/lambda/latest/dg/
invocation-eventfiltering.html, "Filter rule syntax") and "Using event filtering with a DynamoDB
event source" (.../with-ddb-filtering.html):

- a mapping with filters passes a record when any of its filters matches it (at most 5 filters per
  mapping, the default quota; a pattern is a JSON object of at most 4,096 characters: API_Filter);
- in a pattern, every key must match (AND); `$or` takes a list of patterns, any of which matches;
- a key whose value is an object descends into the record's object of that name; a key whose value
  is an array holds the matchers of a leaf (OR): `"text"`, a number, `true`, `null` (the value is
  null), `""` (empty), `{"prefix": ..}`, `{"suffix": ..}`, `{"equals-ignore-case": ..}`,
  `{"anything-but": ..}`, `{"numeric": [op, n, ...]}` and `{"exists": true|false}`;
- matchers apply to leaf values only (a string, number, boolean or null; an array's elements one
  by one): "the Exists operator only works on leaf nodes", so a matcher put on an object never
  matches it, and `{"exists": false}` holds there (no leaf has that path).

A DynamoDB stream record's images are in DynamoDB's JSON: an attribute is an object of one type
key (`{"S": "text"}`, `{"M": {...}}`), so a matcher on an attribute's name, or on its `M` or `L`,
is on a non-leaf and would never match. `check_stream_pattern` refuses such a pattern with an error
naming its path, as a pattern Lambda would refuse (not an object, a matcher that is not an array,
an unknown operator).

Not modelled: EventBridge-only operators (`wildcard`, `cidr`, `anything-but` with `suffix`), the
numeric matching of values written in exponent form, and the decoding of a Kinesis or SQS body as
JSON (only DynamoDB streams are filtered in gco).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gco.errors import GcoInputError

MAX_FILTERS = 5
MAX_PATTERN_CHARS = 4096
OR_KEY = "$or"
_ABSENT = object()  # no leaf at a path (missing, or an object there)
_NUMERIC: dict[str, Callable[[float, float], bool]] = {
    "=": operator.eq,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class EventFilterError(GcoInputError):
    """A filter pattern that Lambda would refuse, or one that could never match a record (a matcher
    on a non-leaf); the message names the pattern's path."""


_OPERATORS = frozenset({"prefix", "suffix", "equals-ignore-case", "anything-but", "numeric", "exists"})
# DynamoDB's attribute value types (DynamoDB API Reference, AttributeValue): leaves, arrays of leaves,
# and the two that hold further attribute values.
_LEAF_TYPES = frozenset({"S", "N", "B", "BOOL", "NULL"})
_SET_TYPES = frozenset({"SS", "NS", "BS"})
_IMAGES = frozenset({"Keys", "NewImage", "OldImage"})


def passes(record: Mapping[str, Any], patterns: Sequence[Mapping[str, Any]]) -> bool:
    """Whether Lambda hands `record` to the function: no filters, or any pattern matching it."""
    return not patterns or any(matches(pattern, record) for pattern in patterns)


def matches(pattern: Mapping[str, Any], event: Any) -> bool:
    """Whether one filter pattern matches an event (a record, or the object below a pattern's key)."""
    for key, rule in pattern.items():
        if key == OR_KEY:
            if not any(matches(branch, event) for branch in rule):
                return False
            continue
        value = event.get(key, _ABSENT) if isinstance(event, Mapping) else _ABSENT
        if isinstance(rule, Mapping):
            if not _matches_nested(rule, value):
                return False
        elif not _matches_leaf(rule, value):
            return False
    return True


def _matches_nested(rule: Mapping[str, Any], value: Any) -> bool:
    """An object pattern against the value of its key: an object, or an array whose elements are
    each tried (event patterns flatten arrays of objects)."""
    if isinstance(value, list):
        return any(_matches_nested(rule, item) for item in value)
    return matches(rule, value if isinstance(value, Mapping) else {})


def _leaves(value: Any) -> list[Any]:
    """The leaf values at a path: the value itself, an array's leaf elements, none for an object."""
    if value is _ABSENT or isinstance(value, Mapping):
        return []
    if isinstance(value, list):
        return [item for item in value if not isinstance(item, Mapping | list)]
    return [value]


def _matches_leaf(matchers: Sequence[Any], value: Any) -> bool:
    leaves = _leaves(value)
    for matcher in matchers:
        if isinstance(matcher, Mapping) and "exists" in matcher:
            if bool(leaves) == bool(matcher["exists"]):
                return True
        elif any(_matches_value(matcher, leaf) for leaf in leaves):
            return True
    return False


def _matches_value(matcher: Any, leaf: Any) -> bool:
    if not isinstance(matcher, Mapping):
        return _same(matcher, leaf)
    ((name, argument),) = matcher.items()
    if name == "prefix":
        return isinstance(leaf, str) and leaf.startswith(argument)
    if name == "suffix":
        return isinstance(leaf, str) and leaf.endswith(argument)
    if name == "equals-ignore-case":
        return isinstance(leaf, str) and leaf.casefold() == str(argument).casefold()
    if name == "anything-but":
        return not _anything_but_excludes(argument, leaf)
    return _numeric(argument, leaf)  # "numeric": the only operator left after check_pattern


def _same(expected: Any, leaf: Any) -> bool:
    """Exact equality of JSON values: a string never equals a number, nor `true` the number 1."""
    if isinstance(expected, bool) or isinstance(leaf, bool):
        return isinstance(expected, bool) and isinstance(leaf, bool) and expected == leaf
    return (type(expected) is type(leaf) or _both_numbers(expected, leaf)) and expected == leaf


def _both_numbers(left: Any, right: Any) -> bool:
    return isinstance(left, int | float) and isinstance(right, int | float)


def _anything_but_excludes(argument: Any, leaf: Any) -> bool:
    if isinstance(argument, Mapping) and "prefix" in argument:
        return isinstance(leaf, str) and leaf.startswith(argument["prefix"])
    excluded = argument if isinstance(argument, list) else [argument]
    return any(_same(item, leaf) for item in excluded)


def _numeric(argument: Sequence[Any], leaf: Any) -> bool:
    if isinstance(leaf, bool) or not isinstance(leaf, int | float):
        return False
    pairs = zip(argument[::2], argument[1::2], strict=True)
    return all(_NUMERIC[op](float(leaf), float(bound)) for op, bound in pairs)


def check_pattern(pattern: Any, path: str = "") -> None:
    """Refuse a pattern Lambda would refuse: not an object, a leaf's matchers not a non-empty array,
    an unknown operator or a malformed one.

    Raises:
        EventFilterError: naming the pattern's path and what is wrong there.
    """
    if not isinstance(pattern, Mapping) or not pattern:
        raise EventFilterError(path or "pattern", "must be a non-empty JSON object")
    for key, rule in pattern.items():
        where = f"{path}.{key}" if path else key
        if key == OR_KEY:
            if not isinstance(rule, list) or len(rule) < 2:
                raise EventFilterError(where, "must be an array of at least two patterns")
            for index, branch in enumerate(rule):
                check_pattern(branch, f"{where}[{index}]")
        elif isinstance(rule, Mapping):
            check_pattern(rule, where)
        elif isinstance(rule, list) and rule:
            for matcher in rule:
                _check_matcher(matcher, where)
        else:
            raise EventFilterError(where, "a leaf's matchers must be a non-empty array")


def _check_matcher(matcher: Any, where: str) -> None:
    if not isinstance(matcher, Mapping):
        if isinstance(matcher, list):
            raise EventFilterError(where, "a matcher cannot be an array")
        return
    if len(matcher) != 1 or next(iter(matcher)) not in _OPERATORS:
        raise EventFilterError(where, f"unknown operator {json.dumps(matcher)} (known: {sorted(_OPERATORS)})")
    ((name, argument),) = matcher.items()
    if name == "exists" and not isinstance(argument, bool):
        raise EventFilterError(where, "exists takes true or false")
    if name in ("prefix", "suffix", "equals-ignore-case") and not isinstance(argument, str):
        raise EventFilterError(where, f"{name} takes a string")
    if name == "numeric" and not _valid_numeric(argument):
        raise EventFilterError(where, 'numeric takes [op, n] or [op, n, op, n] ("=", "<", ">", ...)')


def _valid_numeric(argument: Any) -> bool:
    if not isinstance(argument, list) or len(argument) not in (2, 4):
        return False
    ops, bounds = argument[::2], argument[1::2]
    numbers = all(_both_numbers(bound, 0) and not isinstance(bound, bool) for bound in bounds)
    return all(op in _NUMERIC for op in ops) and numbers


def check_stream_pattern(pattern: Any) -> None:
    """`check_pattern`, then refuse matchers on a non-leaf of a DynamoDB stream record (an image's
    attribute by name, its `M` or `L`), which Lambda accepts and never matches.

    Raises:
        EventFilterError: naming the pattern's path and what is wrong there.
    """
    check_pattern(pattern)
    dynamodb = pattern.get("dynamodb")
    if isinstance(dynamodb, Mapping):
        for image in _IMAGES & dynamodb.keys():
            _check_attributes(dynamodb[image], f"dynamodb.{image}")


def _check_attributes(rule: Any, path: str) -> None:
    """A pattern over a map of attributes (an image, or an `M`): each name holds a typed value."""
    if not isinstance(rule, Mapping):
        raise _non_leaf(path, "a map of attributes")
    for name, value in rule.items():
        if name == OR_KEY:
            for index, branch in enumerate(value):
                _check_attributes(branch, f"{path}.{OR_KEY}[{index}]")
        else:
            _check_typed(value, f"{path}.{name}")


def _check_typed(rule: Any, path: str) -> None:
    """A pattern over one attribute value: an object of DynamoDB type keys."""
    if not isinstance(rule, Mapping):
        raise _non_leaf(path, "an attribute value (an object of one type key: S, N, M, ...)")
    for kind, inner in rule.items():
        where = f"{path}.{kind}"
        if kind == OR_KEY:
            for index, branch in enumerate(inner):
                _check_typed(branch, f"{path}.{OR_KEY}[{index}]")
        elif kind == "M":
            _check_attributes(inner, where)
        elif kind == "L":
            _check_typed(inner, where)  # a list's elements are attribute values, flattened
        elif kind not in _LEAF_TYPES | _SET_TYPES:
            raise EventFilterError(where, f"{kind!r} is not a DynamoDB attribute type")
        elif isinstance(inner, Mapping):
            raise EventFilterError(where, "a leaf value: its matchers must be an array")


def _non_leaf(path: str, what: str) -> EventFilterError:
    return EventFilterError(
        path,
        f"is {what}, not a leaf: Lambda's filter rules match leaf values only (the exists operator "
        "only works on leaf nodes), so this filter would never match; name a leaf below it, "
        'e.g. {"S": [{"exists": true}]}',
    )


def check_filters(patterns: Iterable[str]) -> list[dict[str, Any]]:
    """The JSON patterns of a stream mapping's filters, parsed and checked.

    Raises:
        EventFilterError: more than MAX_FILTERS, a pattern too long or not JSON, or refused by
            `check_stream_pattern`.
    """
    texts = list(patterns)
    if len(texts) > MAX_FILTERS:
        raise EventFilterError("FilterCriteria.Filters", f"at most {MAX_FILTERS} filters per mapping")
    parsed: list[dict[str, Any]] = []
    for index, text in enumerate(texts):
        where = f"FilterCriteria.Filters[{index}].Pattern"
        if len(text) > MAX_PATTERN_CHARS:
            raise EventFilterError(where, f"longer than {MAX_PATTERN_CHARS} characters")
        try:
            pattern = json.loads(text)
        except json.JSONDecodeError as error:
            raise EventFilterError(where, f"not JSON ({error})") from error
        check_stream_pattern(pattern)
        parsed.append(pattern)
    return parsed
