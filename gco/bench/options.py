"""The options of a rounds run, what each mode refuses, and how many rounds to plan.

Refusals are checked before anything launches: a flag that a mode would ignore is bad input (exit 2,
naming it), never silently dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gco.bench.errors import BenchInputError
from gco.bench.manifest import Manifest
from gco.bench.records import Mode
from gco.bench.summary import Adaptive
from gco.bench.williams import adaptive_max_rounds, default_rounds

CI_TARGET = "--ci-target"
MIN_ROUNDS = "--min-rounds"
EXTRA_BODY = "--extra-body"
CHAT_TEMPLATE_KWARGS = "--chat-template-kwargs"
REF_E2E_MS = "--ref-e2e-ms"


class RoundsOptions(BaseModel):
    """The options of one rounds run (the CLI's flags, parsed)."""

    model_config = ConfigDict(frozen=True)

    prompts_path: Path
    run_dir: Path
    mode: Mode = "single"
    rounds: int | None = Field(default=None, ge=1, le=1000)
    engines: list[str] | None = None
    ci_target: float | None = Field(default=None, gt=0)
    min_rounds: int | None = Field(default=None, ge=1)
    serve_cmd: str | None = None
    serve_args: list[str] = Field(default_factory=list)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    reference_e2e_s: float | None = Field(default=None, gt=0)
    memory_wait_s: float = 10.0


def check_options(options: RoundsOptions, manifest: Manifest) -> None:
    """Refuse what the run would otherwise ignore.

    Raises:
        BenchInputError: clip mode given token-stream or adaptive flags (or the manifest's token-stream
            fields); --min-rounds without --ci-target; a load reference outside load mode.
    """
    if options.mode == "clip":
        refused = [
            flag
            for flag, given in (
                (CI_TARGET, options.ci_target is not None),
                (MIN_ROUNDS, options.min_rounds is not None),
                (EXTRA_BODY, bool(options.extra_body)),
                (CHAT_TEMPLATE_KWARGS, bool(options.chat_template_kwargs)),
                (REF_E2E_MS, options.reference_e2e_s is not None),
            )
            if given
        ]
        w = manifest.workload
        refused += [
            f"manifest.workload.{name}"
            for name, given in (
                ("extra_body", bool(w.extra_body)),
                ("chat_template_kwargs", bool(w.chat_template_kwargs)),
                ("load.reference_e2e_s", w.load.reference_e2e_s is not None),
            )
            if given
        ]
        if refused:
            raise BenchInputError(
                ", ".join(refused),
                "not for --mode clip: clips are timed whole, one at a time, each with its own body",
            )
    if options.min_rounds is not None and options.ci_target is None:
        raise BenchInputError(MIN_ROUNDS, f"only applies with {CI_TARGET} (the adaptive stop)")
    if options.reference_e2e_s is not None and options.mode != "load":
        raise BenchInputError(REF_E2E_MS, "only load mode turns levels into rates with a reference")


def with_overrides(manifest: Manifest, options: RoundsOptions) -> Manifest:
    """The manifest with --extra-body and --chat-template-kwargs merged over its workload's own."""
    w = manifest.workload
    workload = w.model_copy(
        update={
            "extra_body": {**w.extra_body, **options.extra_body},
            "chat_template_kwargs": {**w.chat_template_kwargs, **options.chat_template_kwargs},
        }
    )
    return manifest.model_copy(update={"workload": workload})


def planned_rounds(n: int, options: RoundsOptions) -> tuple[int, Adaptive | None]:
    """Rounds to plan; with --ci-target, rounds is the maximum and the adaptive rule is returned."""
    if options.ci_target is None:
        return options.rounds or default_rounds(n), None
    maximum = options.rounds or adaptive_max_rounds(n)
    minimum = options.min_rounds or default_rounds(n)
    if minimum > maximum:
        raise BenchInputError(MIN_ROUNDS, f"{minimum} is above the maximum of {maximum} rounds")
    return maximum, Adaptive(ci_target=options.ci_target, min_rounds=minimum, max_rounds=maximum)
