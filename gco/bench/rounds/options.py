"""The options of a rounds run, what each mode refuses, and how many rounds to plan.

Refusals are checked before anything launches: a flag that a mode would ignore is bad input (exit 2,
naming it), never silently dropped; so is a --serve-cmd template that would not format. The run
settings (startup, stop and serve timeouts, warm-up count, GPU-memory tolerance) default to the
manifest's values; a flag given wins; both are recorded (`run_settings`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gco.bench.clients.records import Mode
from gco.bench.errors import BenchInputError
from gco.bench.rounds.manifest import Manifest
from gco.bench.rounds.measure import check_serve_cmd
from gco.bench.rounds.summary import Adaptive
from gco.bench.rounds.williams import adaptive_max_rounds, default_rounds

CI_TARGET = "--ci-target"
MIN_ROUNDS = "--min-rounds"
EXTRA_BODY = "--extra-body"
CHAT_TEMPLATE_KWARGS = "--chat-template-kwargs"
REF_E2E_MS = "--ref-e2e-ms"
SERVE_CMD = "--serve-cmd"
# flag -> (RoundsOptions field, where the manifest keeps the same setting)
RUN_SETTINGS = {
    "--startup-timeout-s": ("startup_timeout_s", "startup_timeout_s"),
    "--stop-timeout-s": ("stop_timeout_s", "stop_timeout_s"),
    "--serve-timeout-s": ("serve_timeout_s", "serve_timeout_s"),
    "--warmup": ("warmup", "workload.warmup_requests"),
    "--gpu-mem-tolerance-mib": ("gpu_mem_tolerance_mib", "gpu_memory_tolerance_mib"),
}


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
    startup_timeout_s: float | None = Field(default=None, gt=0)
    stop_timeout_s: float | None = Field(default=None, gt=0)
    serve_timeout_s: float | None = Field(default=None, gt=0)
    warmup: int | None = Field(default=None, ge=0, le=1000)
    gpu_mem_tolerance_mib: float | None = Field(default=None, ge=0)


def check_options(options: RoundsOptions, manifest: Manifest) -> None:
    """Refuse what the run would otherwise ignore.

    Raises:
        BenchInputError: clip mode given token-stream or adaptive flags (or the manifest's token-stream
            fields); --min-rounds without --ci-target; a load reference outside load mode; a --serve-cmd
            template with unbalanced quotes or a placeholder it does not know.
    """
    if options.serve_cmd is not None:
        try:
            check_serve_cmd(options.serve_cmd)
        except ValueError as error:
            raise BenchInputError(SERVE_CMD, str(error)) from None
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


def _manifest_value(manifest: Manifest, where: str) -> Any:
    value: Any = manifest
    for part in where.split("."):
        value = getattr(value, part)
    return value


def with_overrides(manifest: Manifest, options: RoundsOptions) -> Manifest:
    """The manifest with --extra-body and --chat-template-kwargs merged over its workload's own, and the
    run-setting flags given (timeouts, --warmup, --gpu-mem-tolerance-mib) in place of its values."""
    w = manifest.workload
    workload = w.model_copy(
        update={
            "extra_body": {**w.extra_body, **options.extra_body},
            "chat_template_kwargs": {**w.chat_template_kwargs, **options.chat_template_kwargs},
            "warmup_requests": w.warmup_requests if options.warmup is None else options.warmup,
        }
    )
    top = {
        where: getattr(options, field)
        for field, where in RUN_SETTINGS.values()
        if "." not in where and getattr(options, field) is not None
    }
    return manifest.model_copy(update={"workload": workload, **top})


def run_settings(manifest: Manifest, options: RoundsOptions) -> dict[str, dict[str, Any]]:
    """Each run setting as the identity records it: the manifest's value, the flag's (None when not
    given) and the value used."""
    out = {}
    for flag, (field, where) in RUN_SETTINGS.items():
        given = getattr(options, field)
        default = _manifest_value(manifest, where)
        out[flag.lstrip("-").replace("-", "_")] = {
            "manifest": default,
            "flag": given,
            "used": default if given is None else given,
        }
    return out


def planned_rounds(n: int, options: RoundsOptions) -> tuple[int, Adaptive | None]:
    """Rounds to plan; with --ci-target, rounds is the maximum and the adaptive rule is returned.

    Raises:
        BenchInputError: the minimum number of rounds is above the maximum.
    """
    if options.ci_target is None:
        return options.rounds or default_rounds(n), None
    maximum = options.rounds or adaptive_max_rounds(n)
    minimum = options.min_rounds or default_rounds(n)
    if minimum > maximum:
        raise BenchInputError(MIN_ROUNDS, f"{minimum} is above the maximum of {maximum} rounds")
    return maximum, Adaptive(ci_target=options.ci_target, min_rounds=minimum, max_rounds=maximum)
