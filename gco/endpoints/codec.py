"""Python values <-> DynamoDB attribute values, with floats that survive the round trip.

DynamoDB has no float type, and it trims leading and trailing zeros of every number it stores
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
`2.0` comes back as `2`. So the stored text cannot say int or float. A float is written as the
shortest decimal that reads back to the same float (its `repr`); a number reads back as an int
when its value is integral, else as a float, and the typed models decide the rest: a field
declared float turns an integral number back into a float. Untyped places (Region status
details) accept no floats for that reason.

`item_size` estimates an item's size by DynamoDB's published rules, so a record too large for
the 400 KB item limit is refused before the write, naming its largest field.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Mapping
from decimal import Decimal, DecimalException
from typing import Any

from gco.endpoints.errors import InvalidSpecError, MalformedRecordError

# DynamoDB numbers: up to 38 significant digits, magnitude 1E-130 .. 9.99...E+125.
MAX_MAGNITUDE = Decimal("9.9999999999999999999999999999999999999E+125")
MIN_MAGNITUDE = Decimal("1E-130")


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


def _encode(value: Any) -> dict[str, Any]:
    """A value `_prepare` returned as its AttributeValue (the wire shape botocore sends as is).

    Written here rather than taken from `boto3.dynamodb.types`: importing that module imports
    boto3 and s3transfer, a quarter of the Lambda's cold import for two small functions.
    """
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, int | Decimal):
        return {"N": str(value)}
    if isinstance(value, Mapping):
        return {"M": {key: _encode(item) for key, item in value.items()}}
    return {"L": [_encode(item) for item in value]}


def _decode(attribute: Mapping[str, Any]) -> Any:
    """One AttributeValue as a plain Python value (numbers by value: see the module docstring)."""
    ((kind, value),) = attribute.items()
    if kind in {"S", "BOOL"}:
        return value
    if kind == "N":
        return _number(value)
    if kind == "M":
        return {key: _decode(item) for key, item in value.items()}
    if kind == "L":
        return [_decode(item) for item in value]
    if kind == "NULL":
        return None
    if kind == "B":
        return _binary(value)
    if kind in {"SS", "BS"}:
        return [item if kind == "SS" else _binary(item) for item in value]
    if kind == "NS":
        return [_number(item) for item in value]
    raise ValueError(f"unknown DynamoDB attribute type {kind!r}")


def _binary(value: Any) -> bytes:
    """A binary value as botocore parses it (bytes) or as the JSON protocol writes it (base64 text)."""
    return base64.b64decode(value, validate=True) if isinstance(value, str) else bytes(value)


def _number(text: str) -> int | float:
    # By value, never by text: the service normalises the text (2.0 -> 2, 1.50 -> 1.5).
    number = Decimal(text)
    return int(number) if number == number.to_integral_value() else float(number)


def to_attribute(value: Any, field: str = "value") -> dict[str, Any]:
    """One Python value as a DynamoDB AttributeValue.

    Raises:
        InvalidSpecError: a value DynamoDB cannot store (a number not finite or out of its range,
            an integer of more than 38 digits, a value of another type).
    """
    return _encode(_prepare(value, field))


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping of attribute names to Python values as a DynamoDB item.

    Raises:
        InvalidSpecError: a value DynamoDB cannot store (as `to_attribute`).
    """
    return {name: to_attribute(value, name) for name, value in values.items()}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A DynamoDB item as plain Python values (int, float, str, bool, None, bytes, list, dict).

    Raises:
        MalformedRecordError: an attribute is not a DynamoDB AttributeValue (naming the item's
            `endpoint_name`, where it has one, and the dotted path of the first bad value).
    """
    try:
        return {name: _decode(value) for name, value in item.items()}
    # What decoding a value that is not an AttributeValue raises: a mapping without exactly one
    # type (unpacking), a type DynamoDB does not define, base64 or a number that does not parse
    # (binascii.Error is a ValueError), a value of the wrong Python type.
    except (ValueError, TypeError, AttributeError, DecimalException):
        pass
    # Only on failure: walk again to name the value (the decode itself keeps no path, as it runs
    # for every attribute of every answer).
    field, problem = next(found for name, value in item.items() if (found := _first_undecodable(value, name)))
    key = item.get("endpoint_name")
    shown = key["S"] if isinstance(key, Mapping) and isinstance(key.get("S"), str) else "?"
    raise MalformedRecordError(shown, field, problem) from None


def _first_undecodable(attribute: Any, path: str) -> tuple[str, str] | None:
    """The dotted path of the first value under `attribute` that does not decode, and why; None if
    all of it decodes."""
    try:
        _decode(attribute)
        return None
    except (ValueError, TypeError, AttributeError, DecimalException) as error:  # as `from_item`
        problem = _problem(attribute, error)
    if isinstance(attribute, Mapping) and len(attribute) == 1:
        ((kind, value),) = attribute.items()
        children: list[tuple[str, Any]] = []
        if kind == "M" and isinstance(value, Mapping):
            children = [(f"{path}.{name}", item) for name, item in value.items()]
        elif kind == "L" and isinstance(value, list):
            children = [(f"{path}[{index}]", item) for index, item in enumerate(value)]
        for where, item in children:
            found = _first_undecodable(item, where)
            if found is not None:
                return found
    return path, problem


def _problem(attribute: Any, error: Exception) -> str:
    if not isinstance(attribute, Mapping) or len(attribute) != 1:
        return "not an attribute value (a mapping of one type to its value)"
    value = next(iter(attribute.values()))
    if isinstance(error, DecimalException):
        return f"{value!r} is not a number"
    if isinstance(error, binascii.Error):
        return f"{value!r} is not base64"
    return str(error)


# DynamoDB's item size limit (400 KB, counted as 400 * 1024 bytes) for one record.
MAX_ITEM_BYTES = 400 * 1024


def value_size(value: Any) -> int:
    """Bytes one value counts toward the item size (an upper estimate of DynamoDB's rules)."""
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, int | float | Decimal):
        digits = len(
            str(Decimal(repr(value)) if isinstance(value, float) else value).strip("-0.").replace(".", "")
        )
        return 1 + (max(digits, 1) + 1) // 2
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, Mapping):
        return 3 + sum(
            1 + len(str(k).encode("utf-8", "surrogatepass")) + value_size(v) for k, v in value.items()
        )
    if isinstance(value, list | tuple):
        return 3 + sum(1 + value_size(item) for item in value)
    return len(str(value))


def item_size(values: Mapping[str, Any]) -> int:
    """Bytes of a whole item: attribute names plus their values."""
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in values.items())


def largest_field(values: Mapping[str, Any], prefix: str = "") -> str:
    """The dotted path of the field that holds most of `values`' bytes: it descends into the
    largest child while that child holds at least half of its parent."""
    path, current = prefix, values
    while isinstance(current, Mapping) and current:
        name, child = max(current.items(), key=lambda item: value_size(item[1]))
        if path and value_size(child) * 2 < value_size(current):
            break
        shown = str(name) if str(name).isprintable() and len(str(name)) <= 64 else "<key>"
        path = f"{path}.{shown}" if path else shown
        current = child
    return path or "record"
