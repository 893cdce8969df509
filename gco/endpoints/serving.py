"""The few fields of an endpoint record that say who may serve it, read without the record's models.

The global way in decides on every request which Region serves it (`gco.global_access.routing`),
from a fresh read of the record. It needs the record's name, lifecycle, desired state, target
Regions, residency and each Region's observed state, and nothing else. The global authorizer reads
them with `parse_serving`, which imports no pydantic: pydantic's import and the record's models were
most of that Lambda function's cold start (docs/benchmarks.md, "Lambda cold start").

`parse_serving` is not a second set of rules. It accepts a value only in the one form the models
also accept with the same meaning (a `str` where the model wants a string, an `int` and never a
`bool` where it wants an integer, a member of the Literal, a Region that `names.region` accepts,
as `Residency` checks it). Anything else, a malformed field or a form the models would coerce,
makes it hand the whole item to `gco.endpoints.record.parse_record` (importing the models then),
whose answer or `MalformedRecordError` is the answer. So for every item whose record parses, the
two agree (tests/unit/endpoints/test_serving.py checks it over generated items), and an item whose
serving fields are malformed is refused with the models' words.

What it does not check: the fields it does not read (the spec's image, ports, resources and the
record's other fields). A record malformed only there is routed; the Regional proxy only serves
what the Region's reconciler applied, and the reconciler validates the whole record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from gco.endpoints import names
from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.residency import residency_allows
from gco.endpoints.states import DESIRED_STATES, REGION_STATES, DesiredState, RegionState

if TYPE_CHECKING:
    from gco.endpoints.record import EndpointRecord

# The models' defaults for fields an item may leave out (`EndpointRecord`, `RegionStatus`, `Residency`).
DEFAULT_DESIRED_STATE: DesiredState = "deploying"
RESIDENCY_FIELDS = frozenset({"enabled", "regions"})  # `Residency` forbids any other (extra="forbid")
# `RegionStatus`'s declared fields and their forms (it allows others: extra="allow").
STATUS_INTEGERS = ("replicas_ready", "replicas_desired")
STATUS_OPTIONAL_TEXT = ("last_sync", "lifecycle_id", "region_generation", "deletion_generation", "error")


@dataclass(frozen=True)
class ServingResidency:
    """`spec.residency`: whether the endpoint's requests must stay in `regions` (empty: its targets)."""

    enabled: bool = False
    regions: tuple[str, ...] = ()

    def allowed(self, targets: list[str]) -> list[str]:
        """The Regions that may serve (`residency_allows`)."""
        return residency_allows(self.enabled, self.regions, targets)


@dataclass(frozen=True)
class ServingStatus:
    """What one Region last observed, as far as serving goes (`RegionStatus`'s fields of that name)."""

    state: RegionState
    replicas_ready: int = 0
    last_sync: str | None = None
    lifecycle_id: str | None = None


@dataclass(frozen=True)
class ServingRecord:
    """An endpoint record's serving fields (`EndpointRecord`'s of the same names; `residency` is its
    `spec.residency`)."""

    endpoint_name: str
    lifecycle_id: str | None = None
    desired_state: DesiredState = DEFAULT_DESIRED_STATE
    target_regions: tuple[str, ...] = ()
    residency: ServingResidency | None = None
    region_status: Mapping[str, ServingStatus] = field(default_factory=dict)


def serving_of(record: EndpointRecord) -> ServingRecord:
    """The serving fields of a record parsed by the models."""
    residency = record.spec.residency
    return ServingRecord(
        endpoint_name=record.endpoint_name,
        lifecycle_id=record.lifecycle_id,
        desired_state=record.desired_state,
        target_regions=tuple(record.target_regions),
        residency=None
        if residency is None
        else ServingResidency(residency.enabled, tuple(residency.regions)),
        region_status={
            region: ServingStatus(status.state, status.replicas_ready, status.last_sync, status.lifecycle_id)
            for region, status in record.region_status.items()
        },
    )


def parse_serving(data: Mapping[str, Any]) -> ServingRecord:
    """The serving fields of a stored item's plain values (module docstring).

    Raises:
        MalformedRecordError: a serving field is malformed (the models' error, naming the field).
    """
    try:
        return _read(data)
    except _NotPlainError:
        # Imported here, and only for an item the plain reading cannot vouch for: the models.
        from gco.endpoints.record import parse_record

        return serving_of(parse_record(dict(data)))


class _NotPlainError(Exception):
    """A value not in the one form the models accept as it is: the models must decide."""


def _read(data: Mapping[str, Any]) -> ServingRecord:
    name = data.get("endpoint_name")
    spec = data.get("spec")
    if not isinstance(name, str) or not isinstance(spec, Mapping):
        raise _NotPlainError
    return ServingRecord(
        endpoint_name=name,
        lifecycle_id=_optional_text(data.get("lifecycle_id")),
        desired_state=_desired(data.get("desired_state", DEFAULT_DESIRED_STATE)),
        target_regions=tuple(_texts(data.get("target_regions", []))),
        residency=_residency(spec.get("residency")),
        region_status=_statuses(data.get("region_status", {})),
    )


def _optional_text(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _NotPlainError
    return value


def _texts(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _NotPlainError
    return value


def _desired(value: Any) -> DesiredState:
    if value not in DESIRED_STATES or not isinstance(value, str):
        raise _NotPlainError
    return cast(DesiredState, value)


def _integer(value: Any) -> int:
    # `type(...) is int`: a bool is an int to Python, and pydantic's lax int takes it (as 0 or 1);
    # here the models decide such a value.
    if type(value) is not int:
        raise _NotPlainError
    return value


def _statuses(value: Any) -> dict[str, ServingStatus]:
    if not isinstance(value, Mapping):
        raise _NotPlainError
    read: dict[str, ServingStatus] = {}
    for region, status in value.items():
        if not isinstance(region, str) or not isinstance(status, Mapping):
            raise _NotPlainError
        state = status.get("state")
        if not isinstance(state, str) or state not in REGION_STATES:
            raise _NotPlainError
        integers = [_integer(status.get(name, 0)) for name in STATUS_INTEGERS]
        texts = [_optional_text(status.get(name)) for name in STATUS_OPTIONAL_TEXT]
        read[region] = ServingStatus(cast(RegionState, state), integers[0], texts[0], texts[1])
    return read


def _residency(value: Any) -> ServingResidency | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not RESIDENCY_FIELDS.issuperset(value):
        raise _NotPlainError
    enabled = value.get("enabled", False)
    regions = _texts(value.get("regions", []))
    if not isinstance(enabled, bool) or len(regions) > names.MAX_REGIONS or len(set(regions)) != len(regions):
        raise _NotPlainError
    for region in regions:
        try:  # narrower than `Residency`'s 1-64 characters: a Region name has 1-25 (`REGION_MAX`)
            names.region(region, "regions", allow_new=True)
        except InvalidSpecError:
            raise _NotPlainError from None
    return ServingResidency(enabled, tuple(regions))
