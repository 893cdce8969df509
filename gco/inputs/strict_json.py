"""JSON as a hostile caller would write it, parsed into one clear refusal rather than a surprise.

Python's `json.loads` lets the last of two equal keys win silently, turns `NaN` and `Infinity`
into floats that no JSON peer accepts, raises `ValueError` (not `JSONDecodeError`) for an integer
of more than 4,300 digits (`sys.get_int_max_str_digits`), and `RecursionError` for deep nesting.
`loads` refuses each, naming the field: a spec file (`--spec`) and a request body (`--body`) are
read alike.
"""

from __future__ import annotations

import json
from typing import Any

from gco.errors import GcoInputError

MAX_DEPTH = 16
MAX_INT_DIGITS = 40  # far beyond any count or size a spec or request holds, far below int's limit


def depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON text (strings skipped), without recursion."""
    level = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            level += 1
            deepest = max(deepest, level)
        elif char in "]}":
            level -= 1
    return deepest


def loads(text: str, field: str, what: str = "it") -> Any:
    """Parse JSON text strictly.

    Raises:
        GcoInputError: on `field`, for invalid JSON, a duplicate key, NaN or Infinity, an integer
            of more than `MAX_INT_DIGITS` digits, or nesting deeper than `MAX_DEPTH`.
    """

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        mapping: dict[str, Any] = {}
        for key, value in pairs:
            if key in mapping:
                raise GcoInputError(field, f"duplicate key {key[:64]!r}")
            mapping[key] = value
        return mapping

    def constant(name: str) -> Any:
        raise GcoInputError(field, f"{name} is not JSON (a number must be finite)")

    def integer(digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_INT_DIGITS:
            raise GcoInputError(field, f"an integer of {len(digits)} digits (at most {MAX_INT_DIGITS})")
        return int(digits)

    if depth(text) > MAX_DEPTH:
        raise GcoInputError(field, f"{what} nests deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, object_pairs_hook=unique, parse_constant=constant, parse_int=integer)
    except json.JSONDecodeError as error:
        raise GcoInputError(field, f"{what} is not valid JSON: {error.msg} at position {error.pos}") from None
