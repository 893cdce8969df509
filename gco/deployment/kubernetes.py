"""Kubernetes versions on EKS: which are in standard support on a given day, and what matches each.

The stacks' config refuses a version outside EKS standard support unless the deployer accepts
extended-support pricing (`allow_extended_support`), and `gco doctor` reports the same status, so
both read this one calendar. Dates are UTC: "billing for extended support starts at the beginning
of the day that the version reaches end of standard support" (Amazon EKS User Guide, "Understand the
Kubernetes version lifecycle on EKS", release calendar). A version is in standard support for 14
months from its EKS release, then in extended support for 12 more.

Sources of the calendar rows: the EKS User Guide's release calendar (awsdocs/amazon-eks-user-guide,
`latest/ug/versioning/kubernetes-versions.adoc`: 1.32-1.34) and its "Kubernetes versions standard
support" page (1.35, 1.36 on EKS), with EKS's 14 + 12 month rule for the end dates.

The Cluster Autoscaler's minor version must equal the cluster's ("We recommend using Cluster
Autoscaler with the Kubernetes control plane version for which it was meant", kubernetes/autoscaler
README, "Releases"); the tags below are the newest patch releases of each line (kubernetes/autoscaler
tags `cluster-autoscaler-1.34.5`, `-1.35.2` of 2026-07-22, `-1.36.1` of 2026-07-22).

The default is the newest version that is in standard support and that every chart a default
deployment installs documents (`gco.deployment.charts`): 1.35. EKS has 1.36, but no KEDA release
lists it yet (KEDA 2.20: 1.33-1.35), and the default config installs KEDA in every Region. A
deployment without KEDA (`keda_regions: []`) may run 1.36.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Literal

SupportStatus = Literal["standard", "extended", "ended", "unknown"]


@dataclass(frozen=True)
class SupportWindow:
    """One Kubernetes minor version's EKS dates (UTC days)."""

    eks_release: date
    end_of_standard: date
    end_of_extended: date

    def status(self, today: date) -> SupportStatus:
        """`standard` before the end-of-standard day, `extended` from it, `ended` from the last day."""
        if today < self.end_of_standard:
            return "standard"
        if today < self.end_of_extended:
            return "extended"
        return "ended"


EKS_CALENDAR: dict[str, SupportWindow] = {
    "1.32": SupportWindow(date(2025, 1, 23), date(2026, 3, 23), date(2027, 3, 23)),
    "1.33": SupportWindow(date(2025, 5, 29), date(2026, 7, 29), date(2027, 7, 29)),
    "1.34": SupportWindow(date(2025, 10, 2), date(2026, 12, 2), date(2027, 12, 2)),
    "1.35": SupportWindow(date(2026, 1, 27), date(2027, 3, 27), date(2028, 3, 27)),
    "1.36": SupportWindow(date(2026, 6, 2), date(2027, 8, 2), date(2028, 8, 2)),
}
# What a new deployment runs (cdk.json and the config model's default): see the module docstring.
DEFAULT_KUBERNETES_VERSION = "1.35"

CLUSTER_AUTOSCALER_TAGS = {"1.34": "v1.34.5", "1.35": "v1.35.2", "1.36": "v1.36.1"}


def today_utc() -> date:
    """The current UTC day (EKS's calendar is in UTC)."""
    return datetime.now(UTC).date()


def support_status(version: str, today: date) -> SupportStatus:
    """Where `version` stands on EKS on `today`; `unknown` for a version not in the calendar."""
    window = EKS_CALENDAR.get(version)
    return window.status(today) if window else "unknown"


def standard_versions(today: date) -> list[str]:
    """The versions in EKS standard support on `today`, oldest first."""
    return [v for v, window in EKS_CALENDAR.items() if window.status(today) == "standard"]


def newest_standard(today: date) -> str | None:
    """The newest version in standard support on `today` (None once the calendar is out of date)."""
    versions = standard_versions(today)
    return versions[-1] if versions else None


def autoscaler_tag(version: str) -> str:
    """The Cluster Autoscaler image tag for a cluster of `version`.

    Raises:
        ValueError: no autoscaler line is pinned for that version.
    """
    if version not in CLUSTER_AUTOSCALER_TAGS:
        known = ", ".join(CLUSTER_AUTOSCALER_TAGS)
        raise ValueError(
            f"no Cluster Autoscaler release is pinned for Kubernetes {version} (pinned: {known})"
        )
    return CLUSTER_AUTOSCALER_TAGS[version]
