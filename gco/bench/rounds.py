"""`bench rounds`: every engine in Williams order for R rounds, with the adaptive stop, summary and evidence.

Holds the GPU lock for the whole run; cells are appended to `rounds/cells.jsonl` as they finish.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gco.bench.cell import CellOptions, CellResult, run_cell
from gco.bench.errors import BenchInputError
from gco.bench.evidence import artifacts, dump_json, rounds_record, write_record
from gco.bench.gpu import GpuProbe
from gco.bench.lock import GpuLock
from gco.bench.manifest import Engine, Manifest
from gco.bench.prompts import Prompt, prompt_digest
from gco.bench.stats import adaptive_done
from gco.bench.summary import (
    Adaptive,
    Summary,
    cell_limitations,
    metric_summaries,
    plan_limitations,
    ratio_half_widths,
    summarize,
)
from gco.bench.williams import RoundPlan, adaptive_max_rounds, default_rounds, plan_rounds
from gco.evidence.report import render_markdown
from gco.evidence.store import EvidenceStore

Progress = Callable[[CellResult, int], None]


class RoundsOptions(BaseModel):
    """The options of one rounds run (the CLI's flags, parsed)."""

    model_config = ConfigDict(frozen=True)

    prompts_path: Path
    run_dir: Path
    mode: Literal["single", "load"] = "single"
    rounds: int | None = Field(default=None, ge=1, le=1000)
    engines: list[str] | None = None
    ci_target: float | None = Field(default=None, gt=0)
    min_rounds: int | None = Field(default=None, ge=1)
    serve_cmd: str | None = None
    serve_args: list[str] = Field(default_factory=list)
    memory_wait_s: float = 10.0


class RoundsOutcome(BaseModel):
    """What a rounds run produced."""

    model_config = ConfigDict(frozen=True)

    summary: Summary
    evidence_id: str
    evidence_path: Path


def planned_rounds(n: int, options: RoundsOptions) -> tuple[int, Adaptive | None]:
    """Rounds to plan; with --ci-target, rounds is the maximum and the adaptive rule is returned."""
    if options.ci_target is None:
        return options.rounds or default_rounds(n), None
    maximum = options.rounds or adaptive_max_rounds(n)
    minimum = options.min_rounds or default_rounds(n)
    if minimum > maximum:
        raise BenchInputError("--min-rounds", f"{minimum} is above the maximum of {maximum} rounds")
    return maximum, Adaptive(ci_target=options.ci_target, min_rounds=minimum, max_rounds=maximum)


def _reference(cell: CellResult) -> float | None:
    return statistics.median(cell.warmup_e2e_s) if cell.warmup_e2e_s else None


def execute(
    plan: RoundPlan,
    engines: Sequence[Engine],
    manifest: Manifest,
    prompts: Sequence[Prompt],
    options: RoundsOptions,
    probe: GpuProbe,
    adaptive: Adaptive | None,
    on_cell: Progress | None = None,
) -> tuple[list[CellResult], int]:
    """Run the cells round by round; stop early when the adaptive rule is met at a whole period."""
    by_label = {engine.label: engine for engine in engines}
    cell_options = CellOptions(
        mode=options.mode,
        prompts_path=options.prompts_path,
        run_dir=options.run_dir,
        serve_cmd=options.serve_cmd,
        serve_args=options.serve_args,
        memory_wait_s=options.memory_wait_s,
    )
    cells: list[CellResult] = []
    log = options.run_dir / "rounds" / "cells.jsonl"
    for round_no, order in enumerate(plan.rounds, start=1):
        for position, label in enumerate(order):
            cell = run_cell(
                by_label[label],
                manifest,
                prompts,
                cell_options,
                round_no=round_no,
                position=position,
                probe=probe,
            )
            cells.append(cell)
            if on_cell is not None:
                on_cell(cell, len(plan.rounds))
            with log.open("a", encoding="utf-8") as handle:
                handle.write(cell.model_dump_json() + "\n")
            if options.mode == "load" and cell_options.reference_e2e_s is None and cell.status == "ok":
                cell_options = cell_options.model_copy(update={"reference_e2e_s": _reference(cell)})
        if adaptive is not None and round_no >= adaptive.min_rounds and round_no % plan.period == 0:
            widths = ratio_half_widths(metric_summaries(cells, plan.labels, options.mode), options.mode)
            if adaptive_done(widths, adaptive.ci_target):
                adaptive.stopped_at, adaptive.outcome = round_no, "target met"
                return cells, round_no
    if adaptive is not None:
        adaptive.stopped_at, adaptive.outcome = len(plan.rounds), "maximum reached"
    return cells, len(plan.rounds)


def _cell_brief(cell: CellResult) -> dict[str, Any]:
    return {
        "label": cell.label,
        "round": cell.round,
        "position": cell.position,
        "status": cell.status,
        "error": cell.error,
        "stop": cell.stop.model_dump() if cell.stop else None,
        "memory": cell.memory.status if cell.memory else "not checked",
        "config_status": cell.config.status,
        "attention_backend": cell.config.attention_backend,
        "prefix_cache_hit_rate": cell.prefix_cache.hit_rate if cell.prefix_cache else None,
    }


def run_rounds(
    manifest: Manifest,
    prompts: Sequence[Prompt],
    options: RoundsOptions,
    *,
    probe: GpuProbe,
    lock: GpuLock,
    stores: Sequence[EvidenceStore] = (),
    on_cell: Progress | None = None,
) -> RoundsOutcome:
    """Plan, run under the GPU lock, summarize, and write plan.json, summary.json/md and the evidence."""
    engines = manifest.select(options.engines)
    labels = [engine.label for engine in engines]
    rounds, adaptive = planned_rounds(len(engines), options)
    plan = plan_rounds(labels, rounds)
    out = options.run_dir / "rounds"
    out.mkdir(parents=True, exist_ok=True)
    dump_json(
        out / "plan.json",
        {
            "plan": plan.model_dump(mode="json"),
            "mode": options.mode,
            "adaptive": adaptive.model_dump() if adaptive else None,
            "prompt_set_digest": prompt_digest(prompts),
        },
    )
    with lock:
        other = probe.processes()
        cells, rounds_run = execute(plan, engines, manifest, prompts, options, probe, adaptive, on_cell)
    limits = plan_limitations(
        plan,
        rounds_run,
        secret_env={e.label: e.secret_env_names() for e in engines},
        extra_body=bool(manifest.workload.extra_body),
        other_gpu_processes=other,
        adaptive=adaptive,
    )
    limits += cell_limitations(cells, labels, options.mode)
    summary = summarize(
        plan, cells, mode=options.mode, rounds_run=rounds_run, limitations=limits, adaptive=adaptive
    )
    dump_json(out / "summary.json", summary.model_dump(mode="json"))
    files = [(out / "plan.json", "plan"), (out / "summary.json", "summary"), (out / "cells.jsonl", "cells")]
    for cell in cells:
        cell_dir = Path(cell.log_path).parent if cell.log_path else out
        files += [
            (cell_dir / "engine.log", "engine log"),
            (cell_dir / "serve" / "result.json", "serve result"),
        ]
    missing = sorted(
        {f"{c.label}: prefix-cache counters" for c in cells if c.status == "ok" and not c.prefix_cache}
    )
    if any(c.memory is None or c.memory.status == "not checked" for c in cells):
        missing.append("GPU memory check (NVML unavailable)")
    record = rounds_record(
        summary,
        engines=engines,
        workload=manifest.workload,
        prompt_digest=prompt_digest(prompts),
        gpu=probe.name(),
        serve_cmd=options.serve_cmd,
        files=artifacts(files, options.run_dir),
        missing=missing,
        cells=[_cell_brief(c) for c in cells],
    )
    path = write_record(record, options.run_dir, stores)
    (out / "summary.md").write_text(render_markdown(record), encoding="utf-8")
    return RoundsOutcome(summary=summary, evidence_id=record.id, evidence_path=path)
