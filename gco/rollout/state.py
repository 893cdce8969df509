"""A rollout's whole state: what was asked, each Region's analysis so far, the outcome.

One JSON document, so a Step Functions execution can carry it from one bounded step (a Lambda
invocation) to the next, and the CLI loops over the same steps in one process (`steps.py`). Its size
is bounded: at most `Rule.max_blocks` blocks per Region, at most 32 Regions, well under the 256 KiB
an execution's state may hold (https://docs.aws.amazon.com/step-functions/latest/dg/limits-overview.html).
"""

# No `from __future__ import annotations` with pydantic models (gco/reconcile/proxy/routes.py says why).

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gco.rollout.decision import Block, Decision, Rule
from gco.rollout.errors import RolloutInputError

RegionPhase = Literal["pending", "waiting", "analysing", "passed", "failed", "inconclusive", "stalled"]
Outcome = Literal["promoted", "rolled_back", "inconclusive"]
ACTIVE: tuple[RegionPhase, ...] = ("waiting", "analysing")
DEFAULT_WEIGHT = 10
DEFAULT_BLOCK_REQUESTS = 8
DEFAULT_READY_TIMEOUT_S = 900.0  # a GPU node from zero and an image pull, as `deploy --wait` allows


class RolloutSettings(BaseModel):
    """What a rollout was asked to do (`gco inference rollout` options, or a StartExecution input)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: str
    image: str
    weight: int = Field(default=DEFAULT_WEIGHT, ge=1, le=99)
    replicas: int | None = Field(default=None, ge=1, le=1000)
    waves: bool = False  # every target Region analysed in turn; else the first alone, then all promoted
    rule: Rule = Field(default_factory=Rule)
    block_requests: int = Field(default=DEFAULT_BLOCK_REQUESTS, ge=2, le=256, multiple_of=2)
    blocks_per_step: int = Field(default=1, ge=1, le=50)
    ready_timeout_s: float = Field(default=DEFAULT_READY_TIMEOUT_S, gt=0, le=86_400)
    # `--allow-unvalidated REASON`: under the validation policy enforce, why the canary's image may run
    # without passing matrix evidence; the admission hook checks the text (1 to 256 plain characters).
    allow_unvalidated: str | None = Field(default=None, min_length=1, max_length=256)


class RegionAnalysis(BaseModel):
    """One Region's wave: its phase, the blocks measured there, the last look's decision."""

    model_config = ConfigDict(extra="forbid")

    region: str
    phase: RegionPhase = "pending"
    ready_by: float | None = None  # clock seconds by which the canary must serve (waiting)
    blocks: list[Block] = Field(default_factory=list)
    decision: Decision | None = None


class RolloutState(BaseModel):
    """The rollout as it stands; `outcome` is set once, when it ends."""

    model_config = ConfigDict(extra="forbid")

    settings: RolloutSettings
    lifecycle_id: str
    primary_image: str
    started_at: str
    regions: list[RegionAnalysis]
    outcome: Outcome | None = None
    reason: str = ""
    evidence_ids: list[str] = Field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def current(self) -> RegionAnalysis | None:
        """The Region whose wave is under way, or None."""
        return next((region for region in self.regions if region.phase in ACTIVE), None)

    def passed(self) -> list[str]:
        return [region.region for region in self.regions if region.phase == "passed"]


def parse_state(document: object) -> RolloutState:
    """A state document (a Step Functions payload) as the model.

    Raises:
        RolloutInputError: it is not a rollout state, naming the first bad field.
    """
    try:
        return RolloutState.model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "state"
        raise RolloutInputError(where, first["msg"]) from None


def parse_settings(document: object) -> RolloutSettings:
    """Rollout settings from a document (a StartExecution input, a stream's request).

    Raises:
        RolloutInputError: a bad field, named.
    """
    try:
        return RolloutSettings.model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "settings"
        raise RolloutInputError(where, first["msg"]) from None
