"""`bench rounds`: every engine in Williams order for R rounds, with the adaptive stop, summary and evidence.

Holds the GPU lock for the whole run; cells are appended to `rounds/cells.jsonl` as they finish, and
`rounds/plan.json` is rewritten after every adaptive check so that a reader sees each look at the data.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from gco.bench.analysis.stats import adaptive_done
from gco.bench.clients.clips import load_clips
from gco.bench.clients.prompts import load_prompts
from gco.bench.clients.records import REQUESTS_FILE
from gco.bench.rounds.cell import CellInputs, CellOptions, CellResult, cell_files, cell_summary, run_cell
from gco.bench.rounds.evidence import artifacts, cell_requests, dump_json, rounds_record, write_record
from gco.bench.rounds.gpu import GpuProbe
from gco.bench.rounds.limitations import cell_limitations, memory_not_checked, plan_limitations
from gco.bench.rounds.lock import GpuLock
from gco.bench.rounds.manifest import Engine, Manifest
from gco.bench.rounds.measure import SERVE_OWNS_SCHEDULE
from gco.bench.rounds.options import (
    RoundsOptions,
    check_options,
    planned_rounds,
    run_settings,
    with_overrides,
)
from gco.bench.rounds.rundata import failure_list, resolved_configs
from gco.bench.rounds.summary import (
    Adaptive,
    AdaptiveCheck,
    Summary,
    metric_summaries,
    ratio_half_widths,
    summarize,
)
from gco.bench.rounds.williams import RoundPlan, plan_rounds
from gco.evidence.report import render_markdown
from gco.evidence.store import EvidenceStore

Progress = Callable[[CellResult, int], None]


class RoundsOutcome(BaseModel):
    """What a rounds run produced."""

    model_config = ConfigDict(frozen=True)

    summary: Summary
    evidence_id: str
    evidence_path: Path


class LoadReference(BaseModel):
    """The one reference e2e every load cell turns its levels into rates with, and where it came from."""

    model_config = ConfigDict(frozen=True)

    e2e_s: float | None = None
    source: str
    to_measure: bool = False


class Execution(BaseModel):
    """The cells that ran, how many rounds, the adaptive rule as it ended, and the load reference."""

    model_config = ConfigDict(frozen=True)

    cells: list[CellResult]
    rounds_run: int
    adaptive: Adaptive | None = None
    reference: LoadReference | None = None


def load_inputs(options: RoundsOptions, manifest: Manifest) -> CellInputs:
    """The prompt set (single, load) or the clip set (clip) named by --prompts."""
    if options.mode == "clip":
        return CellInputs(clips=tuple(load_clips(options.prompts_path, "--prompts")))
    return CellInputs(prompts=tuple(load_prompts(options.prompts_path, manifest.workload.bucket_edges)))


def initial_reference(options: RoundsOptions, manifest: Manifest) -> LoadReference | None:
    """Load mode's reference before any cell: --ref-e2e-ms, the manifest's, or to be measured."""
    if options.mode != "load":
        return None
    if SERVE_OWNS_SCHEDULE & {arg.split("=", 1)[0] for arg in options.serve_args}:
        return LoadReference(source="the serve arguments set the schedule")
    if options.reference_e2e_s is not None:
        return LoadReference(e2e_s=options.reference_e2e_s, source="--ref-e2e-ms")
    if manifest.workload.load.reference_e2e_s is not None:
        return LoadReference(e2e_s=manifest.workload.load.reference_e2e_s, source="manifest")
    return LoadReference(source="the first load cell's warm-up", to_measure=True)


def _plan_document(
    plan: RoundPlan, options: RoundsOptions, inputs: CellInputs, adaptive: Adaptive | None
) -> dict[str, Any]:
    return {
        "plan": plan.model_dump(mode="json"),
        "mode": options.mode,
        "adaptive": adaptive.model_dump(mode="json") if adaptive else None,
        "prompt_set_digest": inputs.digest(),
    }


def execute(
    plan: RoundPlan,
    engines: Sequence[Engine],
    manifest: Manifest,
    inputs: CellInputs,
    options: RoundsOptions,
    probe: GpuProbe,
    adaptive: Adaptive | None,
    on_cell: Progress | None = None,
) -> Execution:
    """Run the cells round by round; stop early when the adaptive rule is met at a whole period."""
    by_label = {engine.label: engine for engine in engines}
    reference = initial_reference(options, manifest)
    cell_options = CellOptions(
        mode=options.mode,
        prompts_path=options.prompts_path,
        run_dir=options.run_dir,
        serve_cmd=options.serve_cmd,
        serve_args=options.serve_args,
        reference_e2e_s=reference.e2e_s if reference else None,
        memory_wait_s=options.memory_wait_s,
    )
    cells: list[CellResult] = []
    out = options.run_dir / "rounds"
    for round_no, order in enumerate(plan.rounds, start=1):
        for position, label in enumerate(order):
            cell = run_cell(
                by_label[label],
                manifest,
                inputs,
                cell_options,
                round_no=round_no,
                position=position,
                probe=probe,
            )
            cells.append(cell)
            if on_cell is not None:
                on_cell(cell, len(plan.rounds))
            with (out / "cells.jsonl").open("a", encoding="utf-8") as handle:
                handle.write(cell.model_dump_json() + "\n")
            if reference and reference.to_measure and cell.status == "ok" and cell.warmup_e2e_s:
                reference = LoadReference(
                    e2e_s=statistics.median(cell.warmup_e2e_s),
                    source=f"warm-up of {cell.label} round {cell.round}",
                )
                cell_options = cell_options.model_copy(update={"reference_e2e_s": reference.e2e_s})
        if adaptive is not None and round_no >= adaptive.min_rounds and round_no % plan.period == 0:
            summaries = metric_summaries(cells, plan.labels, options.mode)
            widths = ratio_half_widths(summaries, options.mode, plan.labels)
            met = adaptive_done(widths, adaptive.ci_target)
            check = AdaptiveCheck(round=round_no, half_widths=widths, met=met)
            adaptive = adaptive.model_copy(update={"checks": [*adaptive.checks, check]})
            dump_json(out / "plan.json", _plan_document(plan, options, inputs, adaptive))
            if met:
                adaptive = adaptive.model_copy(update={"stopped_at": round_no, "outcome": "target met"})
                return Execution(cells=cells, rounds_run=round_no, adaptive=adaptive, reference=reference)
    if adaptive is not None:
        adaptive = adaptive.model_copy(update={"stopped_at": len(plan.rounds), "outcome": "maximum reached"})
    return Execution(cells=cells, rounds_run=len(plan.rounds), adaptive=adaptive, reference=reference)


def _missing(cells: Sequence[CellResult], labels: Sequence[str], mode: str) -> list[str]:
    """What the record lacks: engines with no successful round, counters, evidence, memory checks."""
    ok = [c for c in cells if c.status == "ok"]
    missing = {f"{c.label}: /metrics counters" for c in ok if c.counter_deltas is None}
    missing |= {f"{c.label}: measurement evidence" for c in ok if c.evidence_id is None}
    if mode != "clip":
        missing |= {f"{c.label}: prefix-cache counters" for c in ok if not c.prefix_cache}
    out = [f"{label}: no successful round" for label in labels if not any(c.label == label for c in ok)]
    out += sorted(missing)
    out += [
        f"GPU memory check ({reason}): {len(where)} cell(s)"
        for reason, where in sorted(memory_not_checked(cells).items())
    ]
    return out


def run_rounds(
    manifest: Manifest,
    options: RoundsOptions,
    *,
    probe: GpuProbe,
    lock: GpuLock,
    stores: Sequence[EvidenceStore] = (),
    on_cell: Progress | None = None,
) -> RoundsOutcome:
    """Check, plan, run under the GPU lock, summarize, and write plan.json, summary.json/md and the evidence.

    Raises:
        BenchInputError: a refused option, an unknown engine label, or an unreadable prompt or clip set.
        GpuLockedError: another run holds the GPU lock.
    """
    check_options(options, manifest)
    settings = run_settings(manifest, options)
    manifest = with_overrides(manifest, options)
    inputs = load_inputs(options, manifest)
    engines = manifest.select(options.engines)
    labels = [engine.label for engine in engines]
    rounds, adaptive = planned_rounds(len(engines), options)
    plan = plan_rounds(labels, rounds)
    out = options.run_dir / "rounds"
    out.mkdir(parents=True, exist_ok=True)
    dump_json(out / "plan.json", _plan_document(plan, options, inputs, adaptive))
    with lock:
        other = probe.processes()
        run = execute(plan, engines, manifest, inputs, options, probe, adaptive, on_cell)
    document = _plan_document(plan, options, inputs, run.adaptive)
    if run.reference is not None:
        document["load_reference"] = run.reference.model_dump()
    dump_json(out / "plan.json", document)
    limits = plan_limitations(
        plan,
        run.rounds_run,
        secret_env={e.label: e.secret_env_names() for e in engines},
        extra_body=manifest.workload.extra_body,
        other_gpu_processes=other,
        adaptive=run.adaptive,
    )
    limits += cell_limitations(run.cells, labels, options.mode)
    summary = summarize(
        plan,
        run.cells,
        mode=options.mode,
        rounds_run=run.rounds_run,
        limitations=limits,
        adaptive=run.adaptive,
        extra_body=manifest.workload.extra_body,
    )
    dump_json(out / "summary.json", summary.model_dump(mode="json"))
    files = [(out / "plan.json", "plan"), (out / "summary.json", "summary"), (out / "cells.jsonl", "cells")]
    for cell in run.cells:
        files += cell_files(cell)
    record = rounds_record(
        summary,
        engines=engines,
        workload=manifest.workload,
        prompt_digest=inputs.digest(),
        gpu=probe.name(),
        serve_cmd=options.serve_cmd,
        files=artifacts(files, options.run_dir),
        missing=_missing(run.cells, labels, options.mode),
        cells=[cell_summary(c) for c in run.cells],
        reference=run.reference.model_dump() if run.reference else None,
        requests=[
            found
            for cell in run.cells
            if cell.log_path
            and (found := cell_requests(cell.label, cell.round, Path(cell.log_path).parent / REQUESTS_FILE))
        ],
        settings=settings,
        extra_data={"failures": failure_list(run.cells), "resolved_configs": resolved_configs(run.cells)},
    )
    path = write_record(record, options.run_dir, stores)
    (out / "summary.md").write_text(render_markdown(record), encoding="utf-8")
    return RoundsOutcome(summary=summary, evidence_id=record.id, evidence_path=path)
