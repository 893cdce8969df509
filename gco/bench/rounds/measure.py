"""The measurement subprocess of a rounds cell: `bench serve` (single, load), `bench clip`, or --serve-cmd.

It builds the command line, runs it bounded by the serve timeout, and reads back what the command wrote
under the cell's directory: `serve/result.json` or `clip/result.json`, and its evidence record's id.
"""

from __future__ import annotations

import json
import shlex
import string
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gco.bench.clients.records import ClipResult, Mode, ServeResult
from gco.bench.rounds.manifest import Engine, Manifest
from gco.evidence.errors import InvalidEvidenceError
from gco.evidence.record import validate
from gco.processes.interpreter import python_module

SERVE_OWNS_SCHEDULE = {"--rates", "--reference-e2e", "--closed-loop"}
SERVE_CMD_FIELDS = ("base_url", "prompts", "mode", "label", "round", "run_dir", "model")
RESULT_DIRS: dict[Mode, str] = {"single": "serve", "load": "serve", "clip": "clip"}


class MeasureOptions(BaseModel):
    """What every cell's measurement shares."""

    model_config = ConfigDict(frozen=True)

    mode: Mode
    prompts_path: Path
    serve_cmd: str | None = None
    reference_e2e_s: float | None = None
    serve_args: list[str] = Field(default_factory=list)


class Measurement(BaseModel):
    """What the measurement subprocess left: its result (or why none) and its evidence record's id."""

    model_config = ConfigDict(frozen=True)

    serve: ServeResult | None = None
    clip: ClipResult | None = None
    evidence_id: str | None = None
    error: str | None = None


def _gco(*args: str) -> list[str]:
    return python_module("gco.cli", "bench", *args)


def check_serve_cmd(template: str) -> list[str]:
    """The words of a --serve-cmd template, each checked: only the named placeholders, literal braces doubled.

    Raises:
        ValueError: unbalanced quotes, no command, a placeholder not in SERVE_CMD_FIELDS (a JSON literal
            such as {"a": 1} reads as one), a single { or }, or a placeholder with a format spec,
            conversion, attribute or index.
    """
    try:
        words = shlex.split(template)
    except ValueError as error:
        raise ValueError(f"cannot split into words: {error}") from None
    if not words:
        raise ValueError("no command")
    allowed = ", ".join("{" + name + "}" for name in SERVE_CMD_FIELDS)
    for word in words:
        try:
            parts = list(string.Formatter().parse(word))
        except ValueError as error:
            raise ValueError(f"{word!r}: {error}; write {{{{ and }}}} for literal braces") from None
        for _, field, spec, conversion in parts:
            if field is None:
                continue
            if field not in SERVE_CMD_FIELDS or spec or conversion:
                shown = (
                    "{"
                    + field
                    + (f"!{conversion}" if conversion else "")
                    + (f":{spec}" if spec else "")
                    + "}"
                )
                raise ValueError(
                    f"{shown} in {word!r} is not a placeholder (allowed: {allowed}); "
                    "write {{ and }} for literal braces"
                )
    return words


def _serve_cmd(
    template: str, engine: Engine, options: MeasureOptions, cell_dir: Path, round_no: int
) -> list[str]:
    values = {
        "base_url": f"http://127.0.0.1:{engine.port}",
        "prompts": str(options.prompts_path),
        "mode": options.mode,
        "label": engine.label,
        "round": str(round_no),
        "run_dir": str(cell_dir),
        "model": engine.model.id,
    }
    return [part.format_map(values) for part in check_serve_cmd(template)]


def clip_argv(engine: Engine, manifest: Manifest, options: MeasureOptions, cell_dir: Path) -> list[str]:
    """gco's own `bench clip` of a cell: the cell has warmed up already."""
    argv = _gco(
        "clip",
        "--base-url",
        f"http://127.0.0.1:{engine.port}",
        "--clips",
        str(options.prompts_path),
        "--run-dir",
        str(cell_dir),
        "--warmup",
        "0",
        "--timeout",
        str(manifest.workload.request_timeout_s),
    )
    return argv + list(options.serve_args)


def serve_argv(
    engine: Engine, manifest: Manifest, options: MeasureOptions, cell_dir: Path, round_no: int
) -> list[str]:
    """The measurement command of a cell: `--serve-cmd` with its placeholders, or gco's own.

    Raises:
        ValueError: `--serve-cmd` does not split into words, is empty, or has a brace that is not
            one of its placeholders.
    """
    if options.serve_cmd:
        return _serve_cmd(options.serve_cmd, engine, options, cell_dir, round_no)
    if options.mode == "clip":
        return clip_argv(engine, manifest, options, cell_dir)
    w = manifest.workload
    argv = _gco(
        "serve",
        "--base-url",
        f"http://127.0.0.1:{engine.port}",
        "--prompts",
        str(options.prompts_path),
        "--mode",
        options.mode,
        "--run-dir",
        str(cell_dir),
        "--warmup",
        "0",
        "--model",
        engine.model.id,
        "--api",
        w.api,
        "--max-tokens",
        str(w.max_tokens),
        "--timeout",
        str(w.request_timeout_s),
        "--bucket-edges",
        ",".join(str(e) for e in w.bucket_edges),
    )
    if w.extra_body:
        argv += ["--extra-body", json.dumps(w.extra_body, sort_keys=True)]
    if w.chat_template_kwargs:
        argv += ["--chat-template-kwargs", json.dumps(w.chat_template_kwargs, sort_keys=True)]
    if options.mode == "load":
        load = w.load
        argv += [
            "--levels",
            ",".join(str(level) for level in load.levels),
            "--arrival",
            load.arrival,
            "--burstiness",
            str(load.burstiness),
            "--seed",
            str(load.seed),
        ]
        if load.requests_per_level:
            argv += ["--requests-per-level", str(load.requests_per_level)]
        reference = options.reference_e2e_s or load.reference_e2e_s
        if reference and not SERVE_OWNS_SCHEDULE & {arg.split("=", 1)[0] for arg in options.serve_args}:
            argv += ["--reference-e2e", repr(reference)]
    return argv + list(options.serve_args)


def evidence_id(cell_dir: Path) -> str | None:
    """The id of the valid evidence record the measurement wrote in `cell_dir/evidence`, if exactly one."""
    ids = []
    for path in sorted((cell_dir / "evidence").glob("*.json")):
        try:
            ids.append(validate(json.loads(path.read_text(encoding="utf-8"))).id)
        except (OSError, ValueError, InvalidEvidenceError):
            continue
    return ids[0] if len(ids) == 1 else None


def read_result(mode: Mode, cell_dir: Path) -> Measurement:
    """Read back `serve/result.json` (single, load) or `clip/result.json` (clip)."""
    path = cell_dir / RESULT_DIRS[mode] / "result.json"
    try:
        raw = path.read_bytes()
        if mode == "clip":
            return Measurement(clip=ClipResult.model_validate_json(raw), evidence_id=evidence_id(cell_dir))
        return Measurement(serve=ServeResult.model_validate_json(raw), evidence_id=evidence_id(cell_dir))
    except (OSError, ValidationError) as error:
        return Measurement(error=f"{path.relative_to(cell_dir)} not readable: {str(error)[:200]}")


def run_measurement(argv: Sequence[str], mode: Mode, cell_dir: Path, timeout_s: float) -> Measurement:
    """Run the measurement in its own session, output to `cell_dir/serve.log`; read its result back."""
    log = cell_dir / "serve.log"
    try:
        with log.open("wb") as out:
            done = subprocess.run(
                list(argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
                check=False,
                start_new_session=True,
            )
    except subprocess.TimeoutExpired:
        return Measurement(error=f"measurement ran past {timeout_s:g} s")
    except OSError as error:
        return Measurement(error=f"measurement could not start: {error}")
    if done.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or [""]
        return Measurement(error=f"measurement exited {done.returncode}: {tail[0][:200]}")
    return read_result(mode, cell_dir)
