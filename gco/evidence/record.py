"""The evidence record: one JSON document per run, its JSON Schema and content-digest id.

Validated against the schema on every write; the id is the sha256 of the canonical record without its id.

Schema version 2 adds two rules, and records of version 1 stay readable under the rules they were
written under: each metric name appears once per subject (a consumer keyed by name gets one
statistic), and a record of kind `matrix` names its validated builds (`gco.evidence.builds`).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gco.evidence.builds import BUILDS_KEY, MATRIX_KIND, ValidatedBuilds
from gco.evidence.errors import InvalidEvidenceError

SCHEMA_VERSION = 2
# The first version with unique metric names per subject and a matrix record's validated builds.
RULES_VERSION = 2
RATIO_OF_MEDIANS = "ratio_of_medians"  # the statistic of a ratio to the best engine, as reports draw it


class Metric(BaseModel):
    """One reported number with its statistic, sample size and interval."""

    model_config = ConfigDict(extra="forbid")

    name: str
    value: float
    unit: str
    statistic: str
    n: int = Field(ge=0)
    ci95: tuple[float, float] | None = None
    subject: str


class Artifact(BaseModel):
    """A file the record vouches for, by digest."""

    model_config = ConfigDict(extra="forbid")

    path: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    role: str


class LimitationEntry(BaseModel):
    """A named limitation."""

    model_config = ConfigDict(extra="forbid")

    code: str
    text: str


class EvidenceRecord(BaseModel):
    """The evidence of one run."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    id: str = ""
    kind: str = Field(min_length=1)
    claim_class: Literal["observed", "derived"]
    summary: str
    created_at: str
    identity: dict[str, Any]
    metrics: list[Metric] = Field(default_factory=list)
    artifacts: list[Artifact] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    limitations: list[LimitationEntry] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _version_rules(self) -> EvidenceRecord:
        if self.schema_version < RULES_VERSION:
            return self  # written before the rules: readable as it was written
        seen: set[tuple[str, str]] = set()
        for metric in self.metrics:
            key = (metric.subject, metric.name)
            if key in seen:
                raise ValueError(
                    f"metrics: {metric.name} appears twice for subject {metric.subject!r} "
                    "(one name per statistic)"
                )
            seen.add(key)
        if self.kind == MATRIX_KIND:
            if BUILDS_KEY not in self.data:
                raise ValueError(f"data.{BUILDS_KEY}: a matrix record names the builds it ran")
            ValidatedBuilds.model_validate(self.data[BUILDS_KEY])
        return self

    def digest(self) -> str:
        """sha256 of the canonical JSON of every field but the id."""
        body = self.model_dump(mode="json", exclude={"id"})
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def sealed(self) -> EvidenceRecord:
        """A copy whose id is its content digest."""
        return self.model_copy(update={"id": self.digest()})

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def evidence_schema() -> dict[str, Any]:
    """The record's JSON Schema (draft 2020-12), generated from the model."""
    schema = EvidenceRecord.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["properties"]["id"]["pattern"] = "^[0-9a-f]{64}$"
    builds = ValidatedBuilds.model_json_schema(ref_template="#/$defs/{model}")
    schema.setdefault("$defs", {}).update(builds.pop("$defs", {}))
    schema["$defs"][ValidatedBuilds.__name__] = builds
    schema["properties"]["data"]["properties"] = {BUILDS_KEY: {"$ref": f"#/$defs/{ValidatedBuilds.__name__}"}}
    # A matrix record of the rules' version must name its builds; an older one need not.
    schema["allOf"] = [
        {
            "if": {
                "properties": {"kind": {"const": MATRIX_KIND}, "schema_version": {"minimum": RULES_VERSION}},
                "required": ["kind", "schema_version"],
            },
            "then": {"properties": {"data": {"required": [BUILDS_KEY]}}},
        }
    ]
    return schema


def validate(document: dict[str, Any]) -> EvidenceRecord:
    """Check a JSON document against the schema, the model and its own digest.

    Raises:
        InvalidEvidenceError: the first schema error (with its path), or an id that is not the digest.
    """
    errors = sorted(jsonschema.Draft202012Validator(evidence_schema()).iter_errors(document), key=str)
    if errors:
        where = "/".join(str(part) for part in errors[0].absolute_path) or "(record)"
        raise InvalidEvidenceError(f"evidence record invalid at {where}: {errors[0].message}")
    try:
        record = EvidenceRecord.model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        message = str(first["msg"]).removeprefix("Value error, ")
        where = ".".join(str(part) for part in first["loc"])
        at = f" at {where}" if where else ""
        raise InvalidEvidenceError(f"evidence record invalid{at}: {message}") from None
    if record.id != record.digest():
        raise InvalidEvidenceError("evidence record id is not the digest of its content")
    return record


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
