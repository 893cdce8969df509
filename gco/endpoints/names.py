"""Syntax of the names gco stores: endpoint names, namespaces, AWS Regions, labels and free text.

Each check returns the value or raises `InvalidSpecError` naming the field. Every pattern is
matched against the whole string (`fullmatch`): `re.match` with `$` would accept a trailing
newline. No stored string may hold a control character, a lone surrogate (which cannot even
be encoded as UTF-8 for DynamoDB), a line or paragraph separator (U+2028/U+2029 break a log line
as a newline does) or an invisible format character (bidirectional overrides such as U+202E
make a name read differently from what is stored).
"""

from __future__ import annotations

import functools
import os
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from gco.endpoints.errors import InvalidSpecError
from gco.regions import REGION_MAX, REGION_SYNTAX

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# Kubernetes Service names are DNS-1035 labels (must start with a letter); the endpoint's
# Service and its role objects are named from it (`object_name`).
ENDPOINT_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
# What joins an endpoint name and a role in the names of the role's objects (`chat--canary`). No
# endpoint name may hold it, so no endpoint's own objects can be named like another's role objects
# (with `-canary`, the endpoint `chat-canary` and the canary of `chat` were the same Deployment).
ROLE_SEPARATOR = "--"
# Roles with objects of their own beside the endpoint's (`render.py`), longest last.
OBJECT_ROLES = ("proxy", "store", "canary", "decode", "prefill")
ENDPOINT_NAME_MAX = 63 - len(ROLE_SEPARATOR + max(OBJECT_ROLES, key=len))
MAX_REGIONS = 32
MAX_LABELS = 64
LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# Regions newer than this host's botocore are accepted (by their partition's pattern) only on request.
ALLOW_NEW_REGIONS_ENV = "GCO_ALLOW_NEW_REGIONS"
# Unicode categories refused in every stored string: control characters, lone surrogates, line
# and paragraph separators, and format characters (bidirectional overrides, zero-width joiners).
UNSAFE_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp", "Cf"})


def first_unsafe(value: str) -> int | None:
    """Index of the first unsafe character (see `UNSAFE_CATEGORIES`) in `value`, or None."""
    for index, char in enumerate(value):
        if unicodedata.category(char) in UNSAFE_CATEGORIES:
            return index
    return None


def text(value: Any, field: str, *, max_length: int, allow_empty: bool = True) -> str:
    """Free text: a string of at most `max_length` characters without control characters.

    Raises:
        InvalidSpecError: not a string, empty when not allowed, too long, or holding an unsafe character.
    """
    if not isinstance(value, str):
        raise InvalidSpecError(field, "must be a string")
    if not value and not allow_empty:
        raise InvalidSpecError(field, "must be a non-empty string")
    if len(value) > max_length:
        raise InvalidSpecError(field, f"must be at most {max_length} characters (got {len(value)})")
    index = first_unsafe(value)
    if index is not None:
        raise InvalidSpecError(
            field, f"holds a control or invisible character {value[index]!r} at index {index}"
        )
    return value


def _shown(value: object) -> str:
    """A value for an error message: one line, and short whatever it holds."""
    shown = repr(value)
    return (
        shown
        if len(shown) <= 80
        else f"{shown[:60]}... ({len(value) if isinstance(value, str) else '?'} chars)"
    )


def endpoint_name(value: str, field: str = "name") -> str:
    """Validate an endpoint name: a DNS-1123 label that can also name a Service.

    Raises:
        InvalidSpecError: not a DNS-1123 label starting with a letter, too long, or holding `--`.
    """
    if not isinstance(value, str) or not value:
        raise InvalidSpecError(field, "must be a non-empty string")
    if len(value) > ENDPOINT_NAME_MAX:
        raise InvalidSpecError(field, f"must be at most {ENDPOINT_NAME_MAX} characters (got {len(value)})")
    if not ENDPOINT_NAME.fullmatch(value):
        raise InvalidSpecError(
            field,
            f"{_shown(value)} is not a DNS-1123 label starting with a letter "
            "(lowercase letters, digits and '-', alphanumeric at both ends)",
        )
    if ROLE_SEPARATOR in value:
        raise InvalidSpecError(
            field, f"{_shown(value)} holds {ROLE_SEPARATOR!r}, which gco keeps for the names of role objects"
        )
    return value


def object_name(endpoint: str, role: str) -> str:
    """The name of an endpoint's objects of `role` (one of `OBJECT_ROLES`): `<endpoint>--<role>`.

    Distinct for every (valid endpoint name, role) and never a valid endpoint name itself, since
    endpoint names hold no `ROLE_SEPARATOR`; at most 63 characters (`ENDPOINT_NAME_MAX`).

    Raises:
        ValueError: `role` is not one of `OBJECT_ROLES` (a caller's mistake, not input).
    """
    if role not in OBJECT_ROLES:
        raise ValueError(f"{role!r} is not one of {OBJECT_ROLES}")
    return f"{endpoint}{ROLE_SEPARATOR}{role}"


def namespace(value: str, field: str = "namespace") -> str:
    """Validate a Kubernetes namespace name (DNS-1123 label, at most 63 characters).

    Raises:
        InvalidSpecError: not a DNS-1123 label of at most 63 characters.
    """
    if not isinstance(value, str) or not value or len(value) > 63 or not DNS1123_LABEL.fullmatch(value):
        raise InvalidSpecError(field, f"{_shown(value)} is not a DNS-1123 label of at most 63 characters")
    return value


@functools.cache
def partitions() -> tuple[frozenset[str], tuple[re.Pattern[str], ...]]:
    """The Regions and Region patterns of every partition this host's botocore knows."""
    import botocore.loaders

    data = botocore.loaders.create_loader().load_data("partitions")
    patterns = tuple(re.compile(p["regionRegex"].strip("^$"), re.ASCII) for p in data["partitions"])
    known = frozenset(
        region
        for p in data["partitions"]
        for region in p["regions"]
        if any(pattern.fullmatch(region) for pattern in patterns)
    )
    return known, patterns


def allow_new_regions_default() -> bool:
    return os.environ.get(ALLOW_NEW_REGIONS_ENV, "") in ("1", "true", "yes")


def region(value: str, field: str = "region", *, allow_new: bool | None = None) -> str:
    """Validate an AWS Region name such as `us-east-1`.

    A Region must be one botocore's partitions list; with `allow_new` (default: env
    `GCO_ALLOW_NEW_REGIONS=1`) a Region newer than this host's botocore passes when it fits one
    of the partitions' Region patterns.

    Raises:
        InvalidSpecError: not a Region name, or a Region this botocore does not know (unless `allow_new`).
    """
    if not isinstance(value, str) or not value:
        raise InvalidSpecError(field, "must be a non-empty string")
    if len(value) > REGION_MAX:
        raise InvalidSpecError(field, f"must be at most {REGION_MAX} characters (got {len(value)})")
    if not REGION_SYNTAX.fullmatch(value):
        raise InvalidSpecError(field, f"{_shown(value)} is not an AWS Region name (for example us-east-1)")
    known, patterns = partitions()
    if value in known:
        return value
    if allow_new if allow_new is not None else allow_new_regions_default():
        if any(pattern.fullmatch(value) for pattern in patterns):
            return value
        raise InvalidSpecError(field, f"{value!r} fits no AWS partition's Region pattern")
    raise InvalidSpecError(
        field,
        f"{value!r} is not a Region this gco knows "
        f"(set {ALLOW_NEW_REGIONS_ENV}=1 for a Region newer than it)",
    )


def region_list(
    values: Iterable[str],
    field: str = "target_regions",
    *,
    allow_empty: bool = False,
    allow_new: bool | None = None,
) -> list[str]:
    """Validate Regions and keep first-seen order without duplicates.

    Raises:
        InvalidSpecError: a string, an invalid Region, more than `MAX_REGIONS`, or none when one is needed.
    """
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise InvalidSpecError(field, "must be a list of Region names, not a string")
    ordered: list[str] = []
    for index, value in enumerate(values):
        if index >= MAX_REGIONS * 4:
            raise InvalidSpecError(field, f"must name at most {MAX_REGIONS} Regions")
        region(value, f"{field}[{index}]", allow_new=allow_new)
        if value not in ordered:
            ordered.append(value)
    if len(ordered) > MAX_REGIONS:
        raise InvalidSpecError(field, f"must name at most {MAX_REGIONS} Regions (got {len(ordered)})")
    if not ordered and not allow_empty:
        raise InvalidSpecError(field, "must name at least one Region")
    return ordered


def label_key(value: str, field: str = "labels") -> str:
    """Validate a Kubernetes label key: `[prefix/]name`, prefix a DNS subdomain.

    Raises:
        InvalidSpecError: not a Kubernetes label key.
    """
    if not isinstance(value, str) or not value:
        raise InvalidSpecError(field, "label key must be a non-empty string")
    if len(value) > 253 + 1 + 63:
        raise InvalidSpecError(field, f"label key is too long ({len(value)} characters)")
    prefix, _, name = value.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.fullmatch(prefix)):
        raise InvalidSpecError(field, f"label key prefix {_shown(prefix)} is not a DNS subdomain")
    if len(name) > 63 or not LABEL_NAME.fullmatch(name):
        raise InvalidSpecError(field, f"label key {_shown(value)} is not a valid Kubernetes label name")
    return value


def label_value(value: str, field: str = "labels") -> str:
    """Validate a Kubernetes label value (may be empty).

    Raises:
        InvalidSpecError: not a Kubernetes label value.
    """
    if not isinstance(value, str):
        raise InvalidSpecError(field, "label value must be a string")
    if value and (len(value) > 63 or not LABEL_NAME.fullmatch(value)):
        raise InvalidSpecError(field, f"label value {_shown(value)} is not a valid Kubernetes label value")
    return value


def labels(values: dict[str, str], field: str = "labels") -> dict[str, str]:
    """Validate a label mapping; every key and value is checked.

    Raises:
        InvalidSpecError: not a mapping, more than `MAX_LABELS` labels, or an invalid key or value.
    """
    if not isinstance(values, dict):
        raise InvalidSpecError(field, "must be a mapping of label keys to values")
    if len(values) > MAX_LABELS:
        raise InvalidSpecError(field, f"must have at most {MAX_LABELS} labels (got {len(values)})")
    for key, value in values.items():
        shown_key = key if isinstance(key, str) and key.isprintable() and len(key) <= 80 else "<key>"
        label_key(key, f"{field}.{shown_key}")
        label_value(value, f"{field}.{shown_key}")
    return dict(values)
