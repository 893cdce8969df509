"""`D/matrix/checkpoint.json`: what a run has done, written atomically after every step.

It holds the run id, the settings file it read, the identity, the run's deadline (its start plus
`job_timeout_seconds`), each endpoint's lifecycle id once created, and every step with its verdict
and timings. `gco matrix resume D` reads it, refuses a changed identity, and continues: a step
that passed is not run again (so a deployed endpoint is not deployed twice).

Every save raises `revision` by one, and the run's mirror (`mirror.py`) keeps each revision as
`matrix/checkpoints/<revision>.json` in the evidence bucket, a new object each time (the runner
may only create objects there). A run directory copied back from the bucket after its machine was
lost holds those revisions and perhaps no `checkpoint.json`: the checkpoint read is the highest
revision found.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gco.validation.errors import CheckpointError

CHECKPOINT = Path("matrix") / "checkpoint.json"
REVISIONS = Path("matrix") / "checkpoints"
Verdict = Literal["pass", "fail", "skipped"]
# `job_timeout`: the run's deadline passed; its detail names the step it ended.
StepName = Literal[
    "deploy",
    "ready",
    "health",
    "model_info",
    "request",
    "hpa",
    "proxy",
    "job_timeout",
    "destroy",
    "inventory",
]


class Step(BaseModel):
    """One step of the run against one endpoint (or none: proxy, inventory)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step: StepName
    endpoint: str | None
    verdict: Verdict
    started_at: str
    seconds: float
    detail: str
    attempts: int = 1
    data: dict[str, Any] = Field(default_factory=dict)


class EndpointEntry(BaseModel):
    """One of the run's four endpoints."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    framework: str
    role: str
    lifecycle_id: str | None = None


class Checkpoint(BaseModel):
    """The whole state of a run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    settings_path: str
    identity: dict[str, Any]
    created_at: str
    endpoints: list[EndpointEntry]
    deadline: int | None = None  # epoch seconds: created_at + job_timeout_seconds
    revision: int = 0
    steps: list[Step] = Field(default_factory=list)
    superseded: list[Step] = Field(default_factory=list)  # steps of an endpoint deployed again on resume
    finished: bool = False
    verdict: Verdict | None = None
    evidence_id: str | None = None

    def passed(self, step: StepName, endpoint: str | None) -> bool:
        return any(s.step == step and s.endpoint == endpoint and s.verdict == "pass" for s in self.steps)

    def failed_check(self) -> Step | None:
        """The first failed step before destruction (checks stop there; destruction always runs)."""
        return next(
            (s for s in self.steps if s.verdict == "fail" and s.step not in ("destroy", "inventory")), None
        )

    def forget(self, name: str) -> Checkpoint:
        """A copy in which endpoint `name` is to be deployed again: its steps move to `superseded`."""
        entries = [
            e.model_copy(update={"lifecycle_id": None}) if e.name == name else e for e in self.endpoints
        ]
        return self.model_copy(
            update={
                "endpoints": entries,
                "steps": [s for s in self.steps if s.endpoint != name],
                "superseded": [*self.superseded, *(s for s in self.steps if s.endpoint == name)],
            }
        )

    def endpoint(self, name: str) -> EndpointEntry:
        return next(entry for entry in self.endpoints if entry.name == name)


def revision_path(revision: int) -> str:
    """Where revision `revision` of a checkpoint is kept, relative to the run directory."""
    return f"{REVISIONS.as_posix()}/{revision:08d}.json"


def checkpoint_bytes(checkpoint: Checkpoint) -> bytes:
    return (json.dumps(checkpoint.model_dump(mode="json"), indent=2) + "\n").encode("utf-8")


def write_checkpoint(run_dir: Path, checkpoint: Checkpoint) -> Path:
    """Write atomically (temporary file, then rename), so a crash leaves the previous one whole."""
    path = run_dir / CHECKPOINT
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_bytes(checkpoint_bytes(checkpoint))
    os.replace(partial, path)
    return path


def _parse(path: Path) -> Checkpoint:
    try:
        return Checkpoint.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as error:
        raise CheckpointError(
            "RUN_DIR", f"{path} is not a matrix checkpoint: {error.errors()[0]['msg']}"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise CheckpointError("RUN_DIR", f"cannot read {path}: {error}") from None


def read_checkpoint(run_dir: Path) -> Checkpoint:
    """The run directory's newest checkpoint: `checkpoint.json` or a kept revision, the highest revision.

    Raises:
        CheckpointError: none there, or one is not a checkpoint (field `RUN_DIR`).
    """
    path = run_dir / CHECKPOINT
    candidates = [p for p in [path, *sorted((run_dir / REVISIONS).glob("*.json"))] if p.is_file()]
    if not candidates:
        raise CheckpointError("RUN_DIR", f"no checkpoint at {path}")
    return max((_parse(candidate) for candidate in candidates), key=lambda c: c.revision)
