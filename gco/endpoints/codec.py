"""Python values <-> DynamoDB attribute values, with floats that survive the round trip.

DynamoDB has no float type: a float is stored as the shortest decimal that reads back to the
same float (its `repr`), and numbers read back as int when integral, else float.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from gco.endpoints.errors import InvalidSpecError

# DynamoDB numbers: up to 38 significant digits, magnitude 1E-130 .. 9.99...E+125.
MAX_MAGNITUDE = Decimal("9.9999999999999999999999999999999999999E+125")
MIN_MAGNITUDE = Decimal("1E-130")

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def _to_decimal(value: float, field: str) -> Decimal:
    if not math.isfinite(value):
        raise InvalidSpecError(field, f"{value} is not a finite number")
    number = Decimal(repr(value))
    if number and not MIN_MAGNITUDE <= abs(number) <= MAX_MAGNITUDE:
        raise InvalidSpecError(field, f"{value} is outside the range DynamoDB can store")
    return number


def _prepare(value: Any, field: str) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        return _to_decimal(value, field)
    if isinstance(value, int):
        if len(str(abs(value))) > 38:
            raise InvalidSpecError(field, "integer has more than 38 digits")
        return value
    if isinstance(value, Mapping):
        return {str(key): _prepare(item, f"{field}.{key}") for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_prepare(item, f"{field}[{index}]") for index, item in enumerate(value)]
    raise InvalidSpecError(field, f"cannot store a value of type {type(value).__name__}")


def _restore(value: Any) -> Any:
    if isinstance(value, Decimal):
        text = str(value)
        # Integers are written without a point or exponent; anything else was a float.
        return int(value) if "." not in text and "E" not in text.upper() else float(value)
    if isinstance(value, dict):
        return {key: _restore(item) for key, item in value.items()}
    if isinstance(value, list | set | frozenset):
        return [_restore(item) for item in value]
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    return value


def to_attribute(value: Any, field: str = "value") -> dict[str, Any]:
    """One Python value as a DynamoDB AttributeValue."""
    attribute: dict[str, Any] = dict(_serializer.serialize(_prepare(value, field)))
    return attribute


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping of attribute names to Python values as a DynamoDB item."""
    return {name: to_attribute(value, name) for name, value in values.items()}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A DynamoDB item as plain Python values (int, float, str, bool, None, list, dict)."""
    return {name: _restore(_deserializer.deserialize(value)) for name, value in item.items()}
