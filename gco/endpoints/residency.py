"""Which Regions a residency lets serve an endpoint: the one rule, shared by the spec's model
(`spec.Residency`) and the serving fields read without it (`serving.ServingResidency`)."""

from __future__ import annotations

from collections.abc import Sequence


def residency_allows(enabled: bool, regions: Sequence[str], targets: Sequence[str]) -> list[str]:
    """The Regions that may serve under a residency: the named ones among the targets, else every
    target (all of them when residency is off)."""
    if not enabled or not regions:
        return list(targets)
    return [region for region in regions if region in targets]
