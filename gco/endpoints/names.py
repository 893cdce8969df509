"""Syntax of the names gco stores: endpoint names, namespaces, AWS Regions, Kubernetes labels.

Each check returns the value or raises `InvalidSpecError` naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gco.endpoints.errors import InvalidSpecError

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Kubernetes Service names are DNS-1035 labels (must start with a letter); the endpoint's
# Service and its role Deployments (`<name>-prefill`, the longest suffix) are derived from it.
ENDPOINT_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
ENDPOINT_NAME_MAX = 63 - len("-prefill")
REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]+$")
LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def endpoint_name(value: str, field: str = "name") -> str:
    """Validate an endpoint name: a DNS-1123 label that can also name a Service."""
    if not isinstance(value, str) or not value:
        raise InvalidSpecError(field, "must be a non-empty string")
    if len(value) > ENDPOINT_NAME_MAX:
        raise InvalidSpecError(field, f"must be at most {ENDPOINT_NAME_MAX} characters (got {len(value)})")
    if not ENDPOINT_NAME.match(value):
        raise InvalidSpecError(
            field,
            f"{value!r} is not a DNS-1123 label starting with a letter "
            "(lowercase letters, digits and '-', alphanumeric at both ends)",
        )
    return value


def namespace(value: str, field: str = "namespace") -> str:
    """Validate a Kubernetes namespace name (DNS-1123 label, at most 63 characters)."""
    if not isinstance(value, str) or not value or len(value) > 63 or not DNS1123_LABEL.match(value):
        raise InvalidSpecError(field, f"{value!r} is not a DNS-1123 label of at most 63 characters")
    return value


def region(value: str, field: str = "region") -> str:
    """Validate an AWS Region name such as `us-east-1`."""
    if not isinstance(value, str) or not REGION.match(value):
        raise InvalidSpecError(field, f"{value!r} is not an AWS Region name (for example us-east-1)")
    return value


def region_list(
    values: Iterable[str], field: str = "target_regions", *, allow_empty: bool = False
) -> list[str]:
    """Validate Regions and keep first-seen order without duplicates."""
    if isinstance(values, str):
        raise InvalidSpecError(field, "must be a list of Region names, not a string")
    ordered: list[str] = []
    for index, value in enumerate(values):
        region(value, f"{field}[{index}]")
        if value not in ordered:
            ordered.append(value)
    if not ordered and not allow_empty:
        raise InvalidSpecError(field, "must name at least one Region")
    return ordered


def label_key(value: str, field: str = "labels") -> str:
    """Validate a Kubernetes label key: `[prefix/]name`, prefix a DNS subdomain."""
    if not isinstance(value, str) or not value:
        raise InvalidSpecError(field, "label key must be a non-empty string")
    prefix, _, name = value.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
        raise InvalidSpecError(field, f"label key prefix {prefix!r} is not a DNS subdomain")
    if len(name) > 63 or not LABEL_NAME.match(name):
        raise InvalidSpecError(field, f"label key {value!r} is not a valid Kubernetes label name")
    return value


def label_value(value: str, field: str = "labels") -> str:
    """Validate a Kubernetes label value (may be empty)."""
    if not isinstance(value, str):
        raise InvalidSpecError(field, "label value must be a string")
    if value and (len(value) > 63 or not LABEL_NAME.match(value)):
        raise InvalidSpecError(field, f"label value {value!r} is not a valid Kubernetes label value")
    return value


def labels(values: dict[str, str], field: str = "labels") -> dict[str, str]:
    """Validate a label mapping; every key and value is checked."""
    if not isinstance(values, dict):
        raise InvalidSpecError(field, "must be a mapping of label keys to values")
    for key, value in values.items():
        label_key(key, f"{field}.{key}")
        label_value(value, f"{field}.{key}")
    return dict(values)
