"""`gco bench serve|clip|rounds|report`: timed OpenAI-API load, whole clips, Williams rounds, and reports.

Bad input exits 2 naming the field; each command writes its files under --run-dir and prints a summary.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from gco.bench.clients.clip import ClipSettings, run_clip
from gco.bench.clients.clips import load_clips
from gco.bench.clients.prompts import DEFAULT_EDGES, increasing, load_prompts
from gco.bench.clients.records import MODES, REQUESTS_FILE
from gco.bench.clients.serve import ServeSettings, run_serve
from gco.bench.errors import BenchInputError, NothingServedError
from gco.bench.rounds.cell import CellResult
from gco.bench.rounds.evidence import artifacts, clip_record, dump_json, serve_record, write_record
from gco.bench.rounds.gpu import NvmlProbe
from gco.bench.rounds.lock import GPU_LOCK_ENV, GpuLock
from gco.bench.rounds.manifest import load_manifest, manifest_schema
from gco.bench.rounds.options import RoundsOptions
from gco.bench.rounds.run import run_rounds
from gco.cli.common import CheckedPath, StrictFloat, StrictInt, emit, output_option
from gco.env import EVIDENCE_BUCKET_ENV
from gco.errors import GcoInputError
from gco.evidence.errors import InvalidEvidenceError
from gco.evidence.record import evidence_schema, validate
from gco.evidence.report import render_html, render_markdown
from gco.evidence.store import EvidenceStore, S3EvidenceStore
from gco.inputs import input_files, strict_json


def _json_option(value: str | None, field: str) -> dict[str, Any]:
    if not value:
        return {}
    try:
        parsed = strict_json.loads(value, field, "the value")  # as --body and spec files are read
    except GcoInputError as error:
        raise BenchInputError(field, error.message) from None
    if not isinstance(parsed, dict):
        raise BenchInputError(field, "must be a JSON object")
    return parsed


def _ints(value: str, field: str) -> list[int]:
    parts = [part for part in value.split(",") if part]
    if not all(StrictInt.pattern.fullmatch(part) for part in parts):  # the one integer syntax
        raise BenchInputError(field, f"expected comma-separated integers, got {value[:80]!r}")
    numbers = [int(part) for part in parts]
    if not numbers or any(n < 1 for n in numbers):
        raise BenchInputError(field, "expected positive integers")
    return numbers


def _edges(value: str, field: str) -> list[int]:
    edges = _ints(value, field)
    if (wrong := increasing(edges)) is not None:
        raise BenchInputError(field, wrong)
    return edges


def _run_dir(run_dir: Path | None) -> Path:
    """The run directory (`--run-dir`, else a new one under ./gco-bench), created and writable,
    checked before anything is measured.

    Raises:
        BenchInputError: on `--run-dir`, when it is a file or cannot be created or written.
    """
    directory = run_dir or _default_run_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BenchInputError("--run-dir", f"cannot create {directory}: {error.strerror or error}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise BenchInputError("--run-dir", f"{directory} is not writable")
    return directory


def _floats(value: str, field: str) -> list[float]:
    parts = [part for part in value.split(",") if part]
    if not all(StrictFloat.pattern.fullmatch(part) for part in parts):  # the one number syntax
        raise BenchInputError(field, f"expected comma-separated numbers, got {value[:80]!r}")
    numbers = [float(part) for part in parts]
    if not numbers or any(n <= 0 for n in numbers):
        raise BenchInputError(field, "expected positive numbers")
    return numbers


def _default_run_dir() -> Path:
    return Path("gco-bench") / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _emit(output: str, data: dict[str, Any], line: str) -> None:
    if output == "table":
        click.echo(line)
    else:
        emit(data, output)


def _progress(cell: CellResult, rounds: int) -> None:
    """One line per finished cell on stderr: where the run is, and how that cell went."""
    detail = f" ({cell.error})" if cell.error else ""
    click.echo(f"round {cell.round}/{rounds} {cell.label}: {cell.status}{detail}", err=True)


@click.group()
def bench() -> None:
    """Benchmark OpenAI-API engines: one server (serve) or several in Williams rounds (rounds)."""


@bench.command()
@click.option("--base-url", required=True, help="Engine base URL, e.g. http://127.0.0.1:8000")
@click.option("--prompts", "prompts_path", required=True, type=CheckedPath(path_type=Path))
@click.option("--mode", type=click.Choice(["single", "load"]), default="single", show_default=True)
@click.option("--api", type=click.Choice(["completions", "chat"]), default="completions", show_default=True)
@click.option("--model", default="default", show_default=True)
@click.option("--max-tokens", type=StrictInt(1, 65536), default=128, show_default=True)
@click.option("--warmup", type=StrictInt(0, 1000), default=2, show_default=True)
@click.option("--timeout", "timeout_s", type=StrictFloat(positive=True), default=600.0, show_default=True)
@click.option("--levels", default="1,2,4,8", show_default=True, help="Load mode concurrency levels.")
@click.option("--rates", default=None, help="Load mode: explicit arrival rates (req/s) instead of --levels.")
@click.option(
    "--closed-loop", is_flag=True, help="Load mode: each level runs that many back-to-back workers."
)
@click.option(
    "--arrival", type=click.Choice(["constant", "poisson", "gamma"]), default="poisson", show_default=True
)
@click.option("--burstiness", type=StrictFloat(positive=True), default=1.0, show_default=True)
@click.option("--requests-per-level", type=StrictInt(1, 100000), default=None)
@click.option("--reference-e2e", "reference_e2e_s", type=StrictFloat(positive=True), default=None)
@click.option("--seed", type=StrictInt(), default=0, show_default=True)
@click.option("--extra-body", default=None, help="JSON object merged into every request body.")
@click.option("--chat-template-kwargs", default=None, help="JSON object sent as chat_template_kwargs.")
@click.option("--bucket-edges", default=",".join(str(e) for e in DEFAULT_EDGES), show_default=True)
@click.option("--run-dir", type=CheckedPath(path_type=Path, file_okay=False), default=None)
@output_option
def serve(
    prompts_path: Path,
    rates: str | None,
    bucket_edges: str,
    levels: str,
    extra_body: str | None,
    chat_template_kwargs: str | None,
    run_dir: Path | None,
    output: str,
    **values: Any,
) -> None:
    """Time one server: TTFT, ITL, e2e and decode tok/s per request and prompt-length bucket.

    \b
    Example:
      gco bench serve --base-url http://127.0.0.1:8000 --prompts prompts.jsonl --model m
    """
    prompts = load_prompts(prompts_path, _edges(bucket_edges, "--bucket-edges"))
    settings = ServeSettings(
        levels=_ints(levels, "--levels"),
        rates=_floats(rates, "--rates") if rates else None,
        extra_body=_json_option(extra_body, "--extra-body"),
        chat_template_kwargs=_json_option(chat_template_kwargs, "--chat-template-kwargs"),
        **values,
    )
    directory = _run_dir(run_dir)
    gc.collect()
    gc.freeze()  # start-up objects out of the collector's generations
    gc.disable()  # and no collector pause at all in the timings (reference counting frees the rest)
    try:
        result, records = asyncio.run(run_serve(settings, prompts))
    finally:
        gc.enable()
        gc.unfreeze()
    dump_json(directory / "serve" / "result.json", result.model_dump(mode="json"))
    requests_path = directory / REQUESTS_FILE
    requests_path.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")
    files = artifacts(
        [(directory / "serve" / "result.json", "result"), (requests_path, "requests")], directory
    )
    record = serve_record(result, settings=settings.model_dump(mode="json"), files=files)
    path = write_record(record, directory)
    _emit(
        output,
        {"evidence": str(path), "result": result.model_dump(mode="json")},
        f"{record.summary}\nevidence: {path}",
    )
    if result.requests and result.failed >= result.requests:
        raise NothingServedError(
            f"every timed request failed ({result.failed} of {result.requests}); evidence: {path}"
        )


@bench.command()
@click.option("--base-url", required=True, help="Engine base URL, e.g. http://127.0.0.1:8000")
@click.option(
    "--clips",
    "clips_path",
    required=True,
    type=CheckedPath(path_type=Path),
    help="Clip set: JSONL of {path, body, shape}; each clip is one POST of body to path.",
)
@click.option(
    "--warmup",
    type=StrictInt(0, 1000),
    default=1,
    show_default=True,
    help="Untimed clips per distinct shape before the timed ones.",
)
@click.option("--timeout", "timeout_s", type=StrictFloat(positive=True), default=600.0, show_default=True)
@click.option("--run-dir", type=CheckedPath(path_type=Path, file_okay=False), default=None)
@output_option
def clip(
    base_url: str, clips_path: Path, warmup: int, timeout_s: float, run_dir: Path | None, output: str
) -> None:
    """Time whole clips of a video engine, one at a time: median e2e and clips per minute per shape.

    \b
    Example:
      gco bench clip --base-url http://127.0.0.1:8000 --clips clips.jsonl --run-dir runs/clip-1
    """
    clips = load_clips(clips_path)
    settings = ClipSettings(base_url=base_url, warmup=warmup, timeout_s=timeout_s)
    directory = _run_dir(run_dir)
    gc.collect()
    gc.freeze()  # as in serve: collector pauses over start-up objects stay out of the timings
    try:
        result, records = asyncio.run(run_clip(settings, clips))
    finally:
        gc.unfreeze()
    dump_json(directory / "clip" / "result.json", result.model_dump(mode="json"))
    records_path = directory / "clip" / "clips.jsonl"
    records_path.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")
    files = artifacts([(directory / "clip" / "result.json", "result"), (records_path, "clips")], directory)
    record = clip_record(result, settings=settings.model_dump(mode="json"), files=files)
    path = write_record(record, directory)
    _emit(
        output,
        {"evidence": str(path), "result": result.model_dump(mode="json")},
        f"{record.summary}\nevidence: {path}",
    )


@bench.command()
@click.option(
    "--manifest",
    "manifest_path",
    required=True,
    type=CheckedPath(path_type=Path),
    help="Run manifest, JSON or YAML (schema: gco bench schema manifest).",
)
@click.option(
    "--prompts",
    "prompts_path",
    required=True,
    type=CheckedPath(path_type=Path),
    help="Prompt set: .jsonl of {prompt}, a .json list, or .txt lines; with --mode clip, a clip set.",
)
@click.option(
    "--rounds",
    type=StrictInt(1, 1000),
    default=None,
    help="Default by engine count: 2 -> 4, 3 -> 6, 4 -> 4, 5 -> 10, else whole periods >= 3.",
)
@click.option("--mode", type=click.Choice(list(MODES)), default="single", show_default=True)
@click.option("--run-dir", type=CheckedPath(path_type=Path, file_okay=False), default=None)
@click.option("--engines", default=None, help="Comma-separated subset of the manifest's labels.")
@click.option(
    "--ci-target",
    type=StrictFloat(positive=True),
    default=None,
    help="Adaptive stop: ratio CI relative half-width; --rounds becomes the maximum.",
)
@click.option(
    "--min-rounds",
    type=StrictInt(1, 1000),
    default=None,
    help="Adaptive stop: the first round it may stop.",
)
@click.option(
    "--serve-cmd",
    default=None,
    help="Replaces bench serve; placeholders {base_url} {prompts} {mode} "
    "{label} {round} {run_dir} {model}. Kept only as a digest.",
)
@click.option("--serve-arg", "serve_args", multiple=True, help="Extra argument for every bench serve call.")
@click.option("--extra-body", default=None, help="JSON object sent to every engine alike.")
@click.option("--chat-template-kwargs", default=None, help="JSON object sent to every engine alike.")
@click.option(
    "--ref-e2e-ms",
    type=StrictFloat(positive=True),
    default=None,
    help="Load mode: the shared reference e2e (ms) that turns levels into rates; default: measured.",
)
@click.option(
    "--startup-timeout-s",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds an engine may take to pass its ready check (default: the manifest's, 1200).",
)
@click.option(
    "--stop-timeout-s",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds from SIGTERM to SIGKILL when stopping an engine (default: the manifest's, 30).",
)
@click.option(
    "--serve-timeout-s",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds one measurement (serve, clip or --serve-cmd) may run (default: the manifest's, 7200).",
)
@click.option(
    "--warmup",
    type=click.IntRange(0, 1000),
    default=None,
    help="Untimed warm-up requests per cell (default: the manifest's workload.warmup_requests, 2).",
)
@click.option(
    "--gpu-mem-tolerance-mib",
    type=click.FloatRange(min=0),
    default=None,
    help="MiB over its pre-launch level GPU memory may stay at after a stop (default: the manifest's, 512).",
)
@click.option(
    "--gpu-lock",
    type=CheckedPath(path_type=Path),
    default=None,
    help=f"GPU lock file held for the run (over {GPU_LOCK_ENV}; default ~/.cache/gco/gpu.lock).",
)
@click.option(
    "--evidence-bucket", envvar=EVIDENCE_BUCKET_ENV, default=None, help="Also write the evidence to S3."
)
@output_option
def rounds(
    manifest_path: Path,
    prompts_path: Path,
    rounds: int | None,
    mode: str,
    run_dir: Path | None,
    engines: str | None,
    ci_target: float | None,
    min_rounds: int | None,
    serve_cmd: str | None,
    serve_args: tuple[str, ...],
    extra_body: str | None,
    chat_template_kwargs: str | None,
    ref_e2e_ms: float | None,
    gpu_lock: Path | None,
    evidence_bucket: str | None,
    output: str,
    **run_settings: Any,
) -> None:
    """Run every engine in Williams order for R rounds; medians, bootstrap CIs and ratios to the best.

    \b
    Example:
      gco bench rounds --manifest run.json --prompts prompts.jsonl --run-dir runs/r1
    """
    manifest = load_manifest(manifest_path)
    options = RoundsOptions(
        prompts_path=prompts_path.resolve(),
        run_dir=(run_dir or _default_run_dir()).resolve(),
        mode=mode,
        rounds=rounds,
        engines=[e.strip() for e in engines.split(",") if e.strip()] if engines else None,
        ci_target=ci_target,
        min_rounds=min_rounds,
        serve_cmd=serve_cmd,
        serve_args=list(serve_args),
        extra_body=_json_option(extra_body, "--extra-body"),
        chat_template_kwargs=_json_option(chat_template_kwargs, "--chat-template-kwargs"),
        reference_e2e_s=ref_e2e_ms / 1000 if ref_e2e_ms is not None else None,
        **run_settings,
    )
    stores: list[EvidenceStore] = [S3EvidenceStore(evidence_bucket)] if evidence_bucket else []
    outcome = run_rounds(
        manifest, options, probe=NvmlProbe(), lock=GpuLock(gpu_lock), stores=stores, on_cell=_progress
    )
    line = f"{outcome.summary.line}\nevidence: {outcome.evidence_path}"
    if outcome.summary.limitations:
        line += "\nlimitations: " + ", ".join(sorted({item.code for item in outcome.summary.limitations}))
    _emit(
        output,
        {
            "evidence_id": outcome.evidence_id,
            "evidence": str(outcome.evidence_path),
            "summary": outcome.summary.model_dump(mode="json"),
        },
        line,
    )


@bench.command()
@click.argument("evidence", type=CheckedPath(path_type=Path))
@click.option(
    "--html", "html_path", type=CheckedPath(path_type=Path), default=None, help="Also write an HTML page."
)
def report(evidence: Path, html_path: Path | None) -> None:
    """Print an evidence record (a .json file, or a run directory's only record) as markdown.

    \b
    Example:
      gco bench report runs/r1/evidence.json --html report.html
    """
    if evidence.is_dir():
        found = sorted((evidence / "evidence").glob("*.json")) or sorted(evidence.glob("*.json"))
        if len(found) != 1:
            raise BenchInputError(
                "EVIDENCE", f"{evidence} holds {len(found)} evidence records; name one file"
            )
        evidence = found[0]
    # A regular file only (a FIFO would block the read forever), bounded.
    text = input_files.read_bounded(evidence, "EVIDENCE", input_files.MAX_DATA_FILE_BYTES)
    try:
        record = validate(json.loads(text))
    except (ValueError, InvalidEvidenceError) as error:
        raise BenchInputError("EVIDENCE", f"cannot read {evidence}: {error}") from None
    if html_path is not None:
        html_path.write_text(render_html(record), encoding="utf-8")
    click.echo(render_markdown(record), nl=False)


@bench.command()
@click.argument("which", type=click.Choice(["manifest", "evidence"]))
def schema(which: str) -> None:
    """Print the JSON Schema of a run manifest or of an evidence record.

    \b
    Example:
      gco bench schema manifest
    """
    document = manifest_schema() if which == "manifest" else evidence_schema()
    click.echo(json.dumps(document, indent=2, sort_keys=True))
