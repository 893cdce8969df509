"""The stored endpoint record and each Region's observed status.

Records are parsed at the store edge; a record written by an older gco (no lifecycle) still
parses, with `is_legacy` true until `ensure_lifecycle_metadata` back-fills it.
"""

# No `from __future__ import annotations` in the modules of pydantic models: pydantic would compile and
# evaluate every string annotation when the models are defined, at each Lambda cold start.

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gco.endpoints.admissions import ImageAdmission
from gco.endpoints.errors import InvalidSpecError, MalformedRecordError
from gco.endpoints.namespaces import DEFAULT_NAMESPACE as DEFAULT_NAMESPACE  # noqa: PLC0414 (re-exported: the record default)
from gco.endpoints.paths import INGRESS_PREFIX
from gco.endpoints.spec import EndpointSpec, invalid_spec_from
from gco.endpoints.states import DESIRED_STATES, REGION_STATES, DesiredState, RegionState


def ingress_path_for(name: str) -> str:
    return f"{INGRESS_PREFIX}{name}"


class RegionStatus(BaseModel):
    """What one Region's reconciler last observed, with the fences it wrote under."""

    model_config = ConfigDict(extra="allow", frozen=True)

    state: RegionState
    replicas_ready: int = 0
    replicas_desired: int = 0
    last_sync: str | None = None
    lifecycle_id: str | None = None
    region_generation: str | None = None
    deletion_generation: str | None = None
    error: str | None = None


class EndpointRecord(BaseModel):
    """One row of the endpoint table."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    endpoint_name: str
    lifecycle_id: str | None = None
    desired_state: DesiredState = "deploying"
    target_regions: list[str] = Field(default_factory=list)
    cleanup_regions: list[str] = Field(default_factory=list)
    region_generations: dict[str, str] = Field(default_factory=dict)
    namespace: str = DEFAULT_NAMESPACE
    spec: EndpointSpec
    ingress_path: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    region_status: dict[str, RegionStatus] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    created_by: str | None = None
    deletion_generation: str | None = None
    deletion_regions: list[str] | None = None
    deleted_at: str | None = None  # the first move to deleted
    # Region -> role (primary, canary) -> what admitted its image (gco/endpoints/admissions.py).
    admissions: dict[str, dict[str, ImageAdmission]] = Field(default_factory=dict)
    rollout_evidence: str | None = None  # the id of the last rollout's latest evidence record (gco.rollout)

    @property
    def is_legacy(self) -> bool:
        """True for a record without lifecycle fencing metadata (written by an older gco)."""
        return self.lifecycle_id is None

    @property
    def is_deleted(self) -> bool:
        return self.desired_state == "deleted"

    def pending_deletion_regions(self) -> list[str]:
        """Deletion Regions that have not acknowledged the current deletion generation."""
        if self.deletion_generation is None:
            return []
        return [
            region
            for region in self.deletion_regions or []
            if (status := self.region_status.get(region)) is None
            or status.deletion_generation != self.deletion_generation
        ]

    def to_json(self) -> dict[str, Any]:
        """The record as JSON-ready data, the shape `gco inference status --output json` prints."""
        data = self.model_dump(mode="json", exclude_none=True)
        if not self.admissions:
            data.pop("admissions")  # never admitted under a policy: the record's shape as before
        data["spec"] = self.spec.model_dump(mode="json", exclude_none=True)
        return data


def parse_record(data: dict[str, Any]) -> EndpointRecord:
    """Parse a stored item's plain values as a record.

    Raises:
        MalformedRecordError: naming the item's key and the first bad field (e.g. `spec.port`).
    """
    try:
        return EndpointRecord.model_validate(data)
    except ValidationError as error:
        key = data.get("endpoint_name")
        problem = invalid_spec_from(error, prefix="record")
        field = problem.field.removeprefix("record.")
        shown = key if isinstance(key, str) else repr(key)
        raise MalformedRecordError(shown, field, problem.message) from None


def check_desired_state(value: str, field: str = "desired_state") -> DesiredState:
    """`value` as a desired state.

    Raises:
        InvalidSpecError: `value` is not one of `DESIRED_STATES`.
    """
    if value not in DESIRED_STATES:
        raise InvalidSpecError(field, f"{value!r} is not one of {', '.join(DESIRED_STATES)}")
    return value  # type: ignore[return-value]


def check_region_state(value: str, field: str = "state") -> RegionState:
    """`value` as a Region's observed state.

    Raises:
        InvalidSpecError: `value` is not one of `REGION_STATES`.
    """
    if value not in REGION_STATES:
        raise InvalidSpecError(field, f"{value!r} is not one of {', '.join(REGION_STATES)}")
    return value  # type: ignore[return-value]
