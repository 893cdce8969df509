"""Validated builds: the engine images (by digest) a matrix run ran, and the Region it ran them in.

A record of kind `matrix` (schema version 2 on) holds them under `data.validated_builds`, checked by
the evidence schema, so a reader (the evidence index, `gco.admission`) finds them in one place and
never parses the run's identity. A build is an image digest: a tag names whatever was pushed last,
and a tag that moved is another build (`gco.admission.images` resolves tags before a check).
"""

# No `from __future__ import annotations`: pydantic models (see gco/endpoints/record.py).

import re

from pydantic import BaseModel, ConfigDict, Field

MATRIX_KIND = "matrix"
BUILDS_KEY = "validated_builds"
# An OCI content digest as a registry reports it in `Docker-Content-Digest` (algorithm sha256).
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
DIGEST = re.compile(DIGEST_PATTERN)
REGION_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)+$"


class ValidatedImage(BaseModel):
    """One engine image the run deployed: the reference it ran and that reference's digest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    framework: str = Field(min_length=1)
    image: str = Field(min_length=1)
    digest: str = Field(pattern=DIGEST_PATTERN)


class ValidatedBuilds(BaseModel):
    """The builds of one matrix run and the Region it ran in (its `selected_region`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str = Field(pattern=REGION_PATTERN)
    images: list[ValidatedImage] = Field(min_length=1)


def digest_of(reference: str) -> str | None:
    """The `sha256:<hex>` a reference is pinned to (`name@sha256:...`), or None for a tag."""
    _, at, digest = reference.rpartition("@")
    return digest if at and DIGEST.fullmatch(digest) else None
