"""`D/matrix/checkpoint.json`: what a run has done, written atomically after every step.

It holds the run id, the settings file it read, the identity, each endpoint's lifecycle id once
created, and every step with its verdict and timings. `gco matrix resume D` reads it, refuses a
changed identity, and continues: a step that passed is not run again (so a deployed endpoint is
not deployed twice).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gco.validation.errors import CheckpointError

CHECKPOINT = Path("matrix") / "checkpoint.json"
Verdict = Literal["pass", "fail", "skipped"]
StepName = Literal[
    "deploy", "ready", "health", "model_info", "request", "hpa", "proxy", "destroy", "inventory"
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


def write_checkpoint(run_dir: Path, checkpoint: Checkpoint) -> Path:
    """Write atomically (temporary file, then rename), so a crash leaves the previous one whole."""
    path = run_dir / CHECKPOINT
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(checkpoint.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    os.replace(partial, path)
    return path


def read_checkpoint(run_dir: Path) -> Checkpoint:
    """The run directory's checkpoint.

    Raises:
        CheckpointError: none there, or it is not a checkpoint (field `RUN_DIR`).
    """
    path = run_dir / CHECKPOINT
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise CheckpointError("RUN_DIR", f"no checkpoint at {path}: {error.strerror or error}") from None
    try:
        return Checkpoint.model_validate_json(text)
    except ValidationError as error:
        raise CheckpointError(
            "RUN_DIR", f"{path} is not a matrix checkpoint: {error.errors()[0]['msg']}"
        ) from None
