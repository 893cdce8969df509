"""Admission of engine builds: an image reaches a Region only with passing matrix evidence there.

`admit` decides (`admit.py`); `Admitter` is the hook the fenced writes of `gco.endpoints` call, so
what admitted each image is written with the change it admits; `images.py` resolves tags to digests
(the OCI Distribution API, ECR, and the local stack's stand-in); `policy.py` reads the deployment's
policy. This package may import `gco.endpoints` and `gco.evidence`; nothing below it imports it.
`from_environment` builds the hook the CLI uses. docs/matrix.md ("Validated builds") describes it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from gco import aws
from gco.admission.admit import Admission, Admitter, Command, admit, check_reason
from gco.admission.errors import AdmissionError, ImageResolveError, PolicyError, UnvalidatedImageError
from gco.admission.images import ImageResolver, LocalImageResolver, RegistryResolver, ResolvedImage
from gco.admission.policy import PolicySetting, read_policy
from gco.endpoints.admissions import Policy
from gco.env import LOCAL_REGISTRY_ENV
from gco.evidence.index import EvidenceIndex, S3EvidenceIndex


def resolver_from(environ: Mapping[str, str]) -> ImageResolver:
    """The local stack's registry stand-in where `gco local env` names one, else the registries."""
    local = environ.get(LOCAL_REGISTRY_ENV)
    return LocalImageResolver(Path(local)) if local else RegistryResolver()


def from_environment(
    command: Command,
    *,
    endpoint_url: str | None = None,
    reason: str | None = None,
    by: str = "unknown",
    environ: Mapping[str, str] | None = None,
) -> Admitter:
    """The admission hook of `command` for this deployment: its policy (SSM parameter and
    `GCO_VALIDATION_POLICY`, read at the hook's first call), its evidence bucket's index, the
    registry resolver.

    Raises:
        InvalidSpecError: a bad `--allow-unvalidated` reason (exit 2).
    """
    env = os.environ if environ is None else environ
    checked = check_reason(reason)

    def source() -> tuple[Policy, EvidenceIndex | None]:
        setting = read_policy(endpoint_url, env)
        index = (
            S3EvidenceIndex(setting.evidence_bucket, region=aws.home_region(), endpoint_url=endpoint_url)
            if setting.evidence_bucket and setting.policy != "off"
            else None
        )
        return setting.policy, index

    return Admitter(
        command=command,
        policy="off",
        resolver=resolver_from(env),
        index=None,
        reason=checked,
        by=by,
        source=source,
    )


__all__ = [
    "Admission",
    "AdmissionError",
    "Admitter",
    "ImageResolveError",
    "ImageResolver",
    "LocalImageResolver",
    "PolicyError",
    "PolicySetting",
    "RegistryResolver",
    "ResolvedImage",
    "UnvalidatedImageError",
    "admit",
    "from_environment",
]
