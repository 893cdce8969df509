"""Size limits of a record: DynamoDB's 400 KB item, measured before the write.

The spec has a budget of its own (`SPEC_MAX_BYTES`) so that a spec change, written without
reading the rest of the record, can never push the item past the limit: the other fields are
bounded by their own limits (Regions, labels, status details) and fit in what remains.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gco.endpoints.codec import MAX_ITEM_BYTES, item_size, largest_field, value_size
from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.spec import EndpointSpec, parse_spec

SPEC_MAX_BYTES = 192 * 1024


def checked_spec(spec: EndpointSpec | Mapping[str, Any]) -> EndpointSpec:
    """A valid spec within its byte budget.

    Raises:
        InvalidSpecError: naming the bad field, or the largest field of a spec over budget.
    """
    parsed = parse_spec(dict(spec) if isinstance(spec, Mapping) else spec)
    data = parsed.model_dump(mode="json", exclude_none=True)
    size = value_size(data)
    if size > SPEC_MAX_BYTES:
        raise InvalidSpecError(
            largest_field(data, "spec"),
            f"the spec would take {size} bytes; at most {SPEC_MAX_BYTES} fit in a DynamoDB item "
            "beside the rest of the record",
        )
    return parsed


def check_item_size(fields: Mapping[str, Any]) -> None:
    """Refuse an item DynamoDB would refuse (400 KB), naming its largest field.

    Raises:
        InvalidSpecError: the item is larger than DynamoDB's 400 KB (naming its largest field).
    """
    size = item_size(fields)
    if size > MAX_ITEM_BYTES:
        raise InvalidSpecError(
            largest_field(fields),
            f"the record would take {size} bytes; a DynamoDB item holds at most {MAX_ITEM_BYTES}",
        )
