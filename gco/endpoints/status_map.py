"""One Region's status as the store writes it: observation, fences, and bounded details.

The fences in a status (lifecycle_id, region_generation, deletion_generation) come only from
the fences the write was conditioned on, never from `details`, so a status can never claim a
lifecycle or generation that was not checked. Detail values are strings, ints, bools or None:
a float has no type in DynamoDB (2.0 comes back as 2) and details have no model to restore it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gco.endpoints import names
from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.record import RegionStatus

DETAIL_KEY = re.compile(r"[a-z][a-z0-9_]{0,62}")
MAX_DETAILS = 8
MAX_DETAIL_TEXT = 256
MAX_ERROR_TEXT = 1024
RESERVED = frozenset(RegionStatus.model_fields)


def one_line(text: str, limit: int = MAX_ERROR_TEXT) -> str:
    """An observed error message as one bounded line: control characters become spaces."""
    flat = "".join(" " if names.first_unsafe(char) is not None else char for char in text)
    return flat[:limit]


def checked_details(details: Mapping[str, Any] | None) -> dict[str, Any]:
    """Status details: a few scalar fields that are not the status's own (fences included).

    Raises:
        InvalidSpecError: not a mapping, too many entries, or a key or value that is not allowed.
    """
    if details is None:
        return {}
    if not isinstance(details, Mapping):
        raise InvalidSpecError("details", "must be a mapping")
    if len(details) > MAX_DETAILS:
        raise InvalidSpecError("details", f"must have at most {MAX_DETAILS} entries (got {len(details)})")
    checked: dict[str, Any] = {}
    for key, value in details.items():
        if not isinstance(key, str) or not DETAIL_KEY.fullmatch(key):
            raise InvalidSpecError("details", f"key {str(key)[:64]!r} is not a lowercase identifier")
        if key in RESERVED:
            raise InvalidSpecError(
                f"details.{key}", "is a status field; fences come only from the expected_* arguments"
            )
        if isinstance(value, str):
            names.text(value, f"details.{key}", max_length=MAX_DETAIL_TEXT)
        elif value is not None and not isinstance(value, bool | int):
            raise InvalidSpecError(
                f"details.{key}", "must be a string, an integer, a boolean or null (not a float)"
            )
        checked[key] = value
    return checked


def status_fields(
    state: str,
    replicas_ready: int,
    replicas_desired: int,
    now: str,
    error: str | None,
    details: Mapping[str, Any] | None,
    fences: Mapping[str, str | None],
) -> dict[str, Any]:
    """The stored status map of one Region.

    Raises:
        InvalidSpecError: a replica count that is not an integer from 0 to 100000, or invalid details.
    """
    for field, count in (("replicas_ready", replicas_ready), ("replicas_desired", replicas_desired)):
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 100_000:
            raise InvalidSpecError(field, "must be an integer from 0 to 100000")
    status: dict[str, Any] = {
        **checked_details(details),
        "state": state,
        "replicas_ready": replicas_ready,
        "replicas_desired": replicas_desired,
        "last_sync": now,
    }
    for key, value in fences.items():
        if value is not None:
            status[key] = value
    if error is not None:
        status["error"] = one_line(str(error))
    return status
