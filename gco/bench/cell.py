"""One cell of a rounds run: launch an engine, ready it, warm up, serve, scrape, stop, check, parse its log.

Every failure becomes the cell's status; a cell never raises for an engine's misbehaviour.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gco.bench.enginelog import ResolvedConfig, parse_log
from gco.bench.gpu import GpuProbe, MemoryCheck, check_memory_returned
from gco.bench.manifest import Engine, Manifest
from gco.bench.metrics import PrefixCache, parse_metrics, prefix_cache
from gco.bench.process import EngineProcess, StopReport, clean_env
from gco.bench.prompts import Prompt
from gco.bench.records import RequestRecord, ServeResult
from gco.bench.serve import ServeSettings, warm_up
from gco.bench.transport import Client

CellStatus = Literal["ok", "launch_failed", "not_ready", "exited_before_ready", "crashed", "serve_failed"]
SCRAPE_TIMEOUT_S = 5.0
SERVE_OWNS_SCHEDULE = {"--rates", "--reference-e2e", "--closed-loop"}


class CellOptions(BaseModel):
    """What every cell of a run shares."""

    model_config = ConfigDict(frozen=True)

    mode: Literal["single", "load"]
    prompts_path: Path
    run_dir: Path
    serve_cmd: str | None = None
    reference_e2e_s: float | None = None
    serve_args: list[str] = Field(default_factory=list)
    memory_wait_s: float = 10.0


class CellResult(BaseModel):
    """What happened in one cell."""

    model_config = ConfigDict(extra="forbid")

    label: str
    round: int
    position: int
    status: CellStatus
    error: str | None = None
    ready_s: float | None = None
    warmup_e2e_s: list[float] = Field(default_factory=list)
    stop: StopReport | None = None
    memory: MemoryCheck | None = None
    prefix_cache: PrefixCache | None = None
    config: ResolvedConfig = Field(default_factory=ResolvedConfig)
    serve: ServeResult | None = None
    log_path: str | None = None
    missing_env: list[str] = Field(default_factory=list)


def port_in_use(port: int) -> bool:
    """True when something already accepts connections on 127.0.0.1:`port`."""
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def scrape(base_url: str) -> dict[str, float] | None:
    """GET /metrics and parse it; None when the engine has none or it cannot be read."""
    try:
        with urllib.request.urlopen(f"{base_url}/metrics", timeout=SCRAPE_TIMEOUT_S) as response:  # noqa: S310
            return parse_metrics(response.read().decode("utf-8", "replace"))
    except (urllib.error.URLError, OSError, ValueError):
        return None


def serve_argv(
    engine: Engine, manifest: Manifest, options: CellOptions, cell_dir: Path, round_no: int
) -> list[str]:
    """The bench serve command of a cell: `--serve-cmd` with its placeholders, or gco's own."""
    base_url = f"http://127.0.0.1:{engine.port}"
    if options.serve_cmd:
        values = {
            "base_url": base_url,
            "prompts": str(options.prompts_path),
            "mode": options.mode,
            "label": engine.label,
            "round": str(round_no),
            "run_dir": str(cell_dir),
            "model": engine.model.id,
        }
        return [part.format(**values) for part in shlex.split(options.serve_cmd)]
    w = manifest.workload
    argv = [
        sys.executable,
        "-m",
        "gco.cli",
        "bench",
        "serve",
        "--base-url",
        base_url,
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
    ]
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
        reference = load.reference_e2e_s or options.reference_e2e_s
        if reference and not SERVE_OWNS_SCHEDULE & {arg.split("=", 1)[0] for arg in options.serve_args}:
            argv += ["--reference-e2e", repr(reference)]
    return argv + list(options.serve_args)


def run_serve_subprocess(
    argv: Sequence[str], cell_dir: Path, timeout_s: float
) -> tuple[ServeResult | None, str | None]:
    """Run bench serve; read `serve/result.json` back. Returns (result, error)."""
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
        return None, f"bench serve ran past {timeout_s:g} s"
    except OSError as error:
        return None, f"bench serve could not start: {error}"
    if done.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or [""]
        return None, f"bench serve exited {done.returncode}: {tail[0][:200]}"
    try:
        return ServeResult.model_validate_json((cell_dir / "serve" / "result.json").read_bytes()), None
    except (OSError, ValidationError) as error:
        return None, f"bench serve wrote no readable result: {str(error)[:200]}"


def run_cell(
    engine: Engine,
    manifest: Manifest,
    prompts: Sequence[Prompt],
    options: CellOptions,
    *,
    round_no: int,
    position: int,
    probe: GpuProbe,
) -> CellResult:
    """Run one engine for one round; always stops the engine and returns a result."""
    cell_dir = options.run_dir / "rounds" / f"r{round_no:02d}-{position}-{engine.label}"
    cell_dir.mkdir(parents=True, exist_ok=True)
    launch = clean_env(engine.env, os.environ)
    base_url = f"http://127.0.0.1:{engine.port}"
    gpu_before = probe.used_mib()
    result = CellResult(
        label=engine.label,
        round=round_no,
        position=position,
        status="ok",
        log_path=str(cell_dir / "engine.log"),
        missing_env=launch.missing,
    )
    if port_in_use(engine.port):
        error = f"port {engine.port} already in use before launch: a ready check could reach another process"
        return result.model_copy(update={"status": "launch_failed", "error": error})
    try:
        process = EngineProcess(engine.argv, launch.env, cell_dir / "engine.log")
    except OSError as error:
        return result.model_copy(update={"status": "launch_failed", "error": str(error)})
    try:
        started = time.monotonic()
        ready = process.wait_ready(
            base_url + engine.ready_check.path,
            min(engine.ready_check.timeout_s, manifest.startup_timeout_s),
            engine.ready_check.interval_s,
        )
        result.ready_s = time.monotonic() - started
        if ready != "ready":
            result.status = "not_ready" if ready == "timeout" else "exited_before_ready"
            result.error = f"ready check {engine.ready_check.path}: {ready}"
        else:
            _measure(process, engine, manifest, prompts, options, cell_dir, round_no, result)
    finally:
        result.stop = process.stop(manifest.stop_timeout_s)
        result.memory = check_memory_returned(
            probe, gpu_before, manifest.gpu_memory_tolerance_mib, wait_s=options.memory_wait_s
        )
        result.config = parse_log(process.log_path.read_text(encoding="utf-8", errors="replace").splitlines())
    return result


async def _warm(settings: ServeSettings, prompts: Sequence[Prompt]) -> list[RequestRecord]:
    client = Client(settings.base_url)
    try:
        return await warm_up(client, settings, prompts)
    finally:
        client.close()


def _measure(
    process: EngineProcess,
    engine: Engine,
    manifest: Manifest,
    prompts: Sequence[Prompt],
    options: CellOptions,
    cell_dir: Path,
    round_no: int,
    result: CellResult,
) -> None:
    w = manifest.workload
    settings = ServeSettings(
        base_url=f"http://127.0.0.1:{engine.port}",
        api=w.api,
        model=engine.model.id,
        max_tokens=w.max_tokens,
        extra_body=w.extra_body,
        chat_template_kwargs=w.chat_template_kwargs,
        warmup=w.warmup_requests,
        timeout_s=w.request_timeout_s,
    )
    warm = asyncio.run(_warm(settings, prompts))
    result.warmup_e2e_s = [r.e2e_s for r in warm if r.ok and r.e2e_s is not None]
    before = scrape(settings.base_url)
    if options.mode == "load" and options.reference_e2e_s is None and result.warmup_e2e_s:
        options = options.model_copy(update={"reference_e2e_s": statistics.median(result.warmup_e2e_s)})
    serve, error = run_serve_subprocess(
        serve_argv(engine, manifest, options, cell_dir, round_no), cell_dir, manifest.serve_timeout_s
    )
    after = scrape(settings.base_url) if not process.exited() else None
    result.serve = serve
    if before is not None and after is not None:
        result.prefix_cache = prefix_cache(before, after)
    if serve is None:
        result.status, result.error = "serve_failed", error
    if process.exited():
        result.status, result.error = "crashed", "engine exited during the round"
