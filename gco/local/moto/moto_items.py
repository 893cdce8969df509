"""The local moto server's item building and update-expression parsing, each done once.

Two costs of moto's UpdateItem and PutItem that are the stand-in's, not DynamoDB's (profiled with
py-spy at 1,000 endpoints written at once, about a twentieth of the server's samples together):

- moto checks an item's 400 KB limit (`LimitedSizeDict`, getmoto/moto#1874) on every attribute it
  sets while it builds the item, summing the sizes of every attribute already there: building an
  item of n attributes sizes about n*n/2 of them. `sized_once` builds the item's attributes first
  and checks the same sum once: the sizes are never negative, so the sum with every attribute is
  over the limit exactly when some partial sum moto checked was, and the same `ItemSizeTooLarge`
  is raised from the same call. Attributes set later (an update's SET) keep moto's check.
- moto parses an UpdateExpression twice per call (the handler, to find the names and values it
  uses; the backend, to validate and run it). `parsed_once` keeps the tree per expression text: the
  handler only reads it, and the backend's validator works on a deep copy (`Validator.__init__`
  copies the tree it is given), so a kept tree is never changed. A text that does not parse is
  parsed by moto on every call, so it raises moto's own error.
"""

from __future__ import annotations

import base64
import copy
import functools
from collections.abc import Callable
from typing import Any

PARSES_KEPT = 256  # distinct update expression texts: the store sends a few dozen templates
ITEM_LIMIT = 405_000  # moto's limit (`LimitedSizeDict`): DynamoDB's 400 KB and what moto allows over it
SET_TYPES = frozenset({"SS", "NS", "BS"})  # moto's `DynamoType.is_set`
ATOMIC = (str, bytes, int, float, bool, type(None))  # what `copy.deepcopy` returns as it is


def sized_once(
    convert: Callable[[Any], Any], size_of: Callable[[str, Any], int], limit: int, too_large: type[Exception]
) -> Callable[..., None]:
    """A replacement for moto's `Item.__init__` that checks the item's size once.

    `convert` makes an attribute value (moto's `DynamoType`), `size_of(key, value)` is the bytes
    moto counts for one attribute, `limit` the most an item may hold (moto's 405,000) and
    `too_large` the error it raises (`ItemSizeTooLarge`).
    """

    def build(item: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
        from moto.dynamodb.models.dynamo_type import LimitedSizeDict

        item.hash_key = hash_key
        item.range_key = range_key
        values = {key: convert(value) for key, value in attrs.items()}
        if sum(size_of(key, value) for key, value in values.items()) > limit:
            raise too_large
        item.attrs = LimitedSizeDict()
        dict.update(item.attrs, values)  # moto's own per-key check, already made for the whole item

    return build


def parsed_once(make: Callable[[str], Any]) -> Callable[[str], Any]:
    """`make` (moto's `UpdateExpressionParser.make`) kept per expression text."""
    return functools.lru_cache(maxsize=PARSES_KEPT)(make)


def copy_value(value: Any, memo: dict[int, Any], kind: type) -> Any:
    """moto's `DynamoType.__deepcopy__` (`kind` is `DynamoType`) without `copy.deepcopy` per child."""
    found = memo.get(id(value))
    if found is not None:
        return found
    result = object.__new__(value.__class__)
    memo[id(value)] = result
    result.type = value.type
    inner = value.value
    if value.type == "L":
        result.value = [
            copy_value(child, memo, kind) if type(child) is kind else copy.deepcopy(child, memo)
            for child in inner
        ]
    elif value.type == "M":
        result.value = {
            key: copy_value(child, memo, kind) if type(child) is kind else copy.deepcopy(child, memo)
            for key, child in inner.items()
        }
    elif value.type in SET_TYPES:
        result.value = list(inner)
    else:
        result.value = inner
    return result


def copy_item(item: Any, memo: dict[int, Any], kind: type, attrs_type: type) -> Any:
    """moto's `Item.__deepcopy__` (`kind` is `DynamoType`, `attrs_type` `LimitedSizeDict`) without
    `copy.deepcopy` per attribute; like moto's, the copy's attributes skip the size check."""
    found = memo.get(id(item))
    if found is not None:
        return found
    result = object.__new__(item.__class__)
    memo[id(item)] = result
    result.hash_key = _copied(item.hash_key, memo, kind)
    result.range_key = _copied(item.range_key, memo, kind)
    attrs: dict[str, Any] = dict.__new__(attrs_type)
    dict.update(attrs, {key: _copied(value, memo, kind) for key, value in item.attrs.items()})
    result.attrs = attrs
    return result


def _copied(value: Any, memo: dict[int, Any], kind: type) -> Any:
    return copy_value(value, memo, kind) if type(value) is kind else copy.deepcopy(value, memo)


def regular_json(value: Any, kind: type) -> dict[str, Any]:
    """moto's `DynamoType.to_regular_json` (`kind` is `DynamoType`), each node converted once."""
    inner = value.value
    converted: Any
    if isinstance(inner, dict):
        converted = {key: _regular(child, kind) for key, child in inner.items()}
    elif isinstance(inner, list):
        converted = [_regular(child, kind) for child in inner]
    else:
        converted = inner if isinstance(inner, ATOMIC) else copy.deepcopy(inner)
    if value.type == "B" and isinstance(converted, str):
        converted = base64.b64decode(converted)
    return {value.type: converted}


def _regular(child: Any, kind: type) -> Any:
    if isinstance(child, kind):
        return regular_json(child, kind)
    return child if isinstance(child, ATOMIC) else copy.deepcopy(child)


def install() -> None:  # pragma: no cover - runs in the moto server process
    """Build items and parse update expressions once in this process's moto (before it serves)."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models import dynamo_type
    from moto.dynamodb.models.utilities import bytesize
    from moto.dynamodb.parsing import expressions

    def size_of(key: str, value: Any) -> int:  # as LimitedSizeDict.__setitem__ counts one attribute
        counted = value.size() if type(value) is dynamo_type.DynamoType else bytesize(str(value))
        return int(bytesize(key) + counted)

    kind, attrs_type = dynamo_type.DynamoType, dynamo_type.LimitedSizeDict
    kind.__deepcopy__ = lambda value, memo: copy_value(value, memo, kind)
    kind.to_regular_json = lambda value: regular_json(value, kind)
    dynamo_type.Item.__deepcopy__ = lambda item, memo: copy_item(item, memo, kind, attrs_type)
    dynamo_type.Item.__init__ = sized_once(dynamo_type.DynamoType, size_of, ITEM_LIMIT, ItemSizeTooLarge)
    kept = parsed_once(expressions.UpdateExpressionParser.make)
    expressions.UpdateExpressionParser.make = staticmethod(kept)
