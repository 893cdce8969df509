"""One block of analysis traffic: K requests to each version in a balanced order, and its summary.

Within a block the versions alternate ABBA (primary, canary, canary, primary, repeated), so a
linear drift within the block falls on both alike: each version's mean position is the same
(`order`). The block's value per version is the median of its answered requests, a failed request
counts as an error and adds no time.
"""

# No `from __future__ import annotations` with pydantic models (gco/reconcile/proxy/routes.py says why).

import statistics
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gco.reconcile.proxy.routes import CANARY, PRIMARY
from gco.rollout.decision import Block, VersionBlock
from gco.rollout.errors import RolloutInputError

Version = Literal["primary", "canary"]
ABBA: tuple[Version, ...] = ("primary", "canary", "canary", "primary")  # routes.PRIMARY, routes.CANARY


class Sample(BaseModel):
    """One request's outcome: which version it was pinned to, whether it answered, and its times."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Version
    ok: bool
    status: int | None = None  # the HTTP status, when an answer came
    answered_by: str | None = None  # the version the proxy says answered (`X-Gco-Version`)
    ttft_ms: float | None = Field(default=None, gt=0)
    latency_ms: float | None = Field(default=None, gt=0)


def order(requests_per_version: int) -> list[Version]:
    """The block's order: ABBA repeated, `requests_per_version` to each version (an even number).

    Raises:
        RolloutInputError: `requests_per_version` is not a positive even number.
    """
    if requests_per_version < 2 or requests_per_version % 2:
        raise RolloutInputError("--block-requests", f"{requests_per_version} is not an even number from 2")
    return list(ABBA) * (requests_per_version // 2)


def _median(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def summary(samples: Sequence[Sample]) -> Block:
    """The block of these samples: per version its requests, failures and answered medians."""

    def part(version: str) -> VersionBlock:
        mine = [sample for sample in samples if sample.version == version]
        answered = [sample for sample in mine if sample.ok]
        return VersionBlock(
            requests=len(mine),
            errors=len(mine) - len(answered),
            ttft_ms=_median([sample.ttft_ms for sample in answered]),
            latency_ms=_median([sample.latency_ms for sample in answered]),
        )

    return Block(primary=part(PRIMARY), canary=part(CANARY))


def measure(send: Callable[[Version], Sample], requests_per_version: int) -> tuple[Block, list[Sample]]:
    """Send one block's requests in order through `send` and summarize them.

    Raises:
        RolloutInputError: `requests_per_version` is not a positive even number.
    """
    samples = [send(version) for version in order(requests_per_version)]
    return summary(samples), samples
