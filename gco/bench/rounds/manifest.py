"""The run manifest: engines (argv, env, port, ready check, model) and the workload, with a JSON Schema.

Parsed once at the edge; errors name the field. Env values of None are inherited from the caller.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gco.bench.clients.prompts import increasing
from gco.bench.errors import BenchInputError
from gco.errors import GcoInputError
from gco.evidence.redact import looks_secret
from gco.inputs import input_files

MAX_MANIFEST_BYTES = 1024 * 1024
LABEL = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")


class ReadyCheck(BaseModel):
    """How to tell the engine is ready: a GET on `path` answering 2xx; `timeout_s`, when given, caps the
    run's startup timeout for this engine (unset: the run's, the manifest's or --startup-timeout-s)."""

    model_config = ConfigDict(extra="forbid")

    path: str = "/health"
    timeout_s: float | None = Field(default=None, gt=0, le=86400)
    interval_s: float = Field(default=1.0, gt=0, le=60)


class ModelRef(BaseModel):
    """The model served, as the identity names it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    revision: str | None = None
    precision: str | None = None


class Engine(BaseModel):
    """One engine: a program serving the OpenAI API on `port` of 127.0.0.1."""

    model_config = ConfigDict(extra="forbid")

    label: str
    argv: list[str] = Field(min_length=1)
    env: dict[str, str | None] = Field(default_factory=dict)
    port: int = Field(ge=1, le=65535)
    ready_check: ReadyCheck = Field(default_factory=ReadyCheck)
    model: ModelRef

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        if not LABEL.match(value):
            raise ValueError("must be lowercase letters, digits, '.', '_' or '-' (at most 63)")
        return value

    def secret_env_names(self) -> list[str]:
        """Names whose literal value in the manifest looks like a secret."""
        return sorted(k for k, v in self.env.items() if v is not None and looks_secret(k, v))


class LoadSettings(BaseModel):
    """Load mode: concurrency levels turned into arrival rates with one reference e2e."""

    model_config = ConfigDict(extra="forbid")

    levels: list[int] = Field(default_factory=lambda: [1, 2, 4, 8], min_length=1)
    arrival: Literal["constant", "poisson", "gamma"] = "poisson"
    burstiness: float = Field(default=1.0, gt=0)
    requests_per_level: int | None = Field(default=None, ge=1, le=100_000)
    reference_e2e_s: float | None = Field(default=None, gt=0)
    seed: int = 0


class Workload(BaseModel):
    """What every engine is asked alike."""

    model_config = ConfigDict(extra="forbid")

    api: Literal["completions", "chat"] = "completions"
    max_tokens: int = Field(default=128, ge=1, le=65536)
    bucket_edges: list[int] = Field(default_factory=lambda: [128, 512, 2048])
    warmup_requests: int = Field(default=2, ge=0, le=1000)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    load: LoadSettings = Field(default_factory=LoadSettings)
    request_timeout_s: float = Field(default=600.0, gt=0)

    @field_validator("bucket_edges")
    @classmethod
    def _edges_increase(cls, edges: list[int]) -> list[int]:
        if (wrong := increasing(edges)) is not None:
            raise ValueError(wrong)
        return edges


class Manifest(BaseModel):
    """A benchmark run's manifest."""

    model_config = ConfigDict(extra="forbid")

    engines: list[Engine] = Field(min_length=1, max_length=16)
    workload: Workload = Field(default_factory=Workload)
    startup_timeout_s: float = Field(default=1200.0, gt=0)
    stop_timeout_s: float = Field(default=30.0, gt=0)
    serve_timeout_s: float = Field(default=7200.0, gt=0)
    gpu_memory_tolerance_mib: float = Field(default=512.0, ge=0)

    @model_validator(mode="after")
    def _unique(self) -> Manifest:
        labels = [engine.label for engine in self.engines]
        if len(set(labels)) != len(labels):
            raise ValueError("engine labels must be unique")
        return self

    def select(self, labels: list[str] | None) -> list[Engine]:
        """The engines named by `--engines`, in manifest order (all when None).

        Raises:
            BenchInputError: `--engines` names an engine the manifest does not hold.
        """
        if not labels:
            return list(self.engines)
        unknown = sorted(set(labels) - {engine.label for engine in self.engines})
        if unknown:
            raise BenchInputError("--engines", f"not in the manifest: {', '.join(unknown)}")
        return [engine for engine in self.engines if engine.label in labels]


def manifest_schema() -> dict[str, Any]:
    """The manifest's JSON Schema."""
    return Manifest.model_json_schema()


def _field(loc: tuple[int | str, ...]) -> str:
    return "manifest." + ".".join(str(part) for part in loc) if loc else "manifest"


def load_manifest(path: Path) -> Manifest:
    """Read a manifest from JSON or YAML (`gco.inputs.input_files`: a regular file of at most
    `MAX_MANIFEST_BYTES`, strict JSON, YAML by the 1.2 core schema).

    Raises:
        BenchInputError: unreadable or invalid; the field is the dotted path of the first error.
    """
    try:
        data = input_files.load_document(path, "--manifest", MAX_MANIFEST_BYTES)
    except GcoInputError as error:
        raise BenchInputError("--manifest", error.message) from None
    if not isinstance(data, dict):
        raise BenchInputError("--manifest", "must be a mapping")
    try:
        return Manifest.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        raise BenchInputError(_field(tuple(first["loc"])), first["msg"]) from None
