"""Evidence records: the schema-validated JSON document of a run, its stores and its human report.

Every run writes one record (content-digest id) locally, optionally to S3, with markdown and HTML beside it.
"""

from gco.evidence.errors import EvidenceConflictError, EvidenceError, EvidenceStoreError, InvalidEvidenceError
from gco.evidence.record import Artifact, EvidenceRecord, LimitationEntry, Metric, evidence_schema, validate
from gco.evidence.store import EvidenceStore, LocalEvidenceStore, S3EvidenceStore

__all__ = [
    "Artifact",
    "EvidenceConflictError",
    "EvidenceError",
    "EvidenceRecord",
    "EvidenceStore",
    "EvidenceStoreError",
    "InvalidEvidenceError",
    "LimitationEntry",
    "LocalEvidenceStore",
    "Metric",
    "S3EvidenceStore",
    "evidence_schema",
    "validate",
]
