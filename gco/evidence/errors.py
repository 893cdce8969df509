"""Errors of the evidence package.

    EvidenceError               (gco.errors.GcoError)
    ├── InvalidEvidenceError    a record fails its JSON Schema or its id is not its digest
    ├── EvidenceConflictError   write-once: a different record already has that id
    └── EvidenceStoreError      the store (disk or S3) failed

botocore errors are converted at the S3 store boundary with `raise ... from`.
"""

from __future__ import annotations

from gco.errors import GcoError


class EvidenceError(GcoError):
    """Root of the evidence package's errors."""


class InvalidEvidenceError(EvidenceError):
    """The record does not validate against the evidence schema."""


class EvidenceConflictError(EvidenceError):
    """A different record is already stored under this id."""


class EvidenceStoreError(EvidenceError):
    """Reading or writing the store failed."""
