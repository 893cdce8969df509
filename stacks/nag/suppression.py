"""The shape of one cdk-nag suppression: one resource path, one rule, one specific reason.

The lists live by part of the deployment (`stacks/nag/suppressions.py`, `addon_suppressions.py`,
`suppressions_k8s.py`); each imports this module, which imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdk_nag import RegexAppliesTo

# The compliance packs whose rules `each_pack` names (stacks/app.py NAG_PACKS runs them).
PACKS = ("NIST.800.53.R5", "HIPAA.Security", "PCI.DSS.321")


@dataclass(frozen=True)
class Suppression:
    """One accepted finding: the resource's path, the rule's id, why, and the exact resources of a
    wildcard finding (`applies_to`; empty for a finding about the resource itself)."""

    path: str
    rule: str
    reason: str
    applies_to: tuple[str | RegexAppliesTo, ...] = ()


def each_pack(path: str, rule: str, reason: str) -> list[Suppression]:
    """The same suppression under each of `PACKS`, whose rule ids differ only by the pack's prefix."""
    return [Suppression(path, f"{pack}-{rule}", reason) for pack in PACKS]
