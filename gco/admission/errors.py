"""Errors of the admission package.

    AdmissionError                 (gco.errors.GcoError)
    ├── UnvalidatedImageError      under `enforce`, an image without passing evidence in a Region (exit 1)
    ├── ImageResolveError          a registry (or ECR) could not resolve a tag to a digest (exit 1)
    ├── PolicyError                the deployment's policy could not be read, or is not a policy (exit 1)
    └── ModelSizeError             a model_source could not be listed to size the model (exit 1)

httpx and botocore errors are converted where they are met, with `raise ... from`.
"""

from __future__ import annotations

from gco.errors import GcoError


class AdmissionError(GcoError):
    """Root of the admission package's errors."""


class UnvalidatedImageError(AdmissionError):
    """An image has no passing matrix evidence in a target Region and the policy is `enforce`."""


class ImageResolveError(AdmissionError):
    """A tag could not be resolved to a digest."""


class PolicyError(AdmissionError):
    """The validation policy could not be read or is not one of off, warn, enforce."""


class ModelSizeError(AdmissionError):
    """A `model_source` could not be listed to read the model's size; the message names the field."""
