"""What admitted each image of an endpoint in each Region: the record's `admissions` field (pure).

`admissions[region][role]` (role `primary` or `canary`) names the image the spec runs there, the
digest its tag named when it was checked, and why it was let in: the passing matrix evidence
(`evidence_id`), or an operator's reason (`--allow-unvalidated REASON`), with who and when. It is
written in the same fenced write as the spec or target change it admits (`EndpointStore.create`,
`update_spec`, `update_target_regions`), so no record runs an image its admissions do not name.
`gco.admission` decides the entries; this module holds their model and the hook a write calls.
"""

# No `from __future__ import annotations`: pydantic models (see gco/endpoints/record.py).

from collections.abc import Mapping
from typing import Literal, Optional, get_args

from pydantic import BaseModel, ConfigDict, Field

from gco.endpoints.spec import EndpointSpec

Policy = Literal["off", "warn", "enforce"]
POLICIES: tuple[str, ...] = get_args(Policy)
# validated: passing evidence; allowed: none, let in with a reason; warned: none, let in under `warn`.
Outcome = Literal["validated", "allowed", "warned"]
PRIMARY = "primary"
CANARY = "canary"
REASON_MAX = 256
BY_MAX = 256


class ImageAdmission(BaseModel):
    """How one image of the spec was admitted in one Region."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str = Field(max_length=1024)
    digest: Optional[str] = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")  # noqa: UP045
    outcome: Outcome
    policy: Policy
    evidence_id: Optional[str] = Field(default=None, pattern=r"^[0-9a-f]{64}$")  # noqa: UP045
    reason: Optional[str] = Field(default=None, max_length=REASON_MAX)  # noqa: UP045
    by: str = Field(max_length=BY_MAX)
    at: str = Field(max_length=64)


# Region -> role -> how its image was admitted.
Admissions = dict[str, dict[str, ImageAdmission]]


def spec_images(spec: EndpointSpec) -> dict[str, str]:
    """The images a spec runs, by role."""
    images = {PRIMARY: spec.image}
    if spec.canary is not None:
        images[CANARY] = spec.canary.image
    return images


def admissions_data(
    admissions: Mapping[str, Mapping[str, ImageAdmission]],
) -> dict[str, dict[str, dict[str, str]]]:
    """The map as stored (no nulls: DynamoDB keeps none)."""
    return {
        region: {role: entry.model_dump(mode="json", exclude_none=True) for role, entry in roles.items()}
        for region, roles in admissions.items()
    }
