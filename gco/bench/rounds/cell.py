"""One cell of a rounds run: launch, ready, check the served model, warm up, measure, scrape, stop, check.

Every failure becomes the cell's status; a cell never raises for an engine's misbehaviour. Each step
returns a value and `run_cell` assembles the frozen `CellResult` from them. Beside the engine log the
cell leaves `resolved_config.json` and both /metrics scrapes (`metrics-before.prom`, `metrics-after.prom`).
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gco.bench.analysis.enginelog import ResolvedConfig, parse_log
from gco.bench.analysis.launchfacts import LaunchCommand
from gco.bench.analysis.metrics import PrefixCache, counter_deltas, parse_metrics, prefix_cache
from gco.bench.clients import clip as clip_client
from gco.bench.clients import serve as serve_client
from gco.bench.clients.clips import Clip, clip_digest
from gco.bench.clients.prompts import Prompt, prompt_digest
from gco.bench.clients.records import REQUESTS_FILE, ClipResult, ServeResult
from gco.bench.clients.transport import Client
from gco.bench.rounds.engine_http import scrape_text, served_models
from gco.bench.rounds.gpu import NOT_LAUNCHED, GpuProbe, MemoryCheck, check_memory_returned
from gco.bench.rounds.manifest import Engine, Manifest
from gco.bench.rounds.measure import MeasureOptions, run_measurement, serve_argv
from gco.processes.launch import EngineProcess, StopReport, clean_env

__all__ = [
    "CellInputs",
    "CellOptions",
    "CellResult",
    "CellStatus",
    "cell_files",
    "cell_summary",
    "run_cell",
    "serve_argv",
]

CellStatus = Literal[
    "ok", "launch_failed", "not_ready", "exited_before_ready", "wrong_model", "crashed", "serve_failed"
]
Clock = Callable[[], datetime]
CONFIG_FILE = "resolved_config.json"
METRICS_BEFORE = "metrics-before.prom"
METRICS_AFTER = "metrics-after.prom"


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """UTC ISO-8601 with milliseconds and a Z."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class CellOptions(MeasureOptions):
    """What every cell of a run shares."""

    run_dir: Path
    memory_wait_s: float = 10.0


class CellInputs(BaseModel):
    """What every cell sends: a prompt set (single, load) or a clip set (clip)."""

    model_config = ConfigDict(frozen=True)

    prompts: tuple[Prompt, ...] = ()
    clips: tuple[Clip, ...] = ()

    def digest(self) -> str:
        return clip_digest(self.clips) if self.clips else prompt_digest(self.prompts)


class CellResult(BaseModel):
    """What happened in one cell."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str
    round: int
    position: int
    status: CellStatus
    error: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    ready_s: float | None = None
    served_models: list[str] | None = None
    served_model: str | None = None
    warmup_e2e_s: list[float] = Field(default_factory=list)
    stop: StopReport | None = None
    memory: MemoryCheck | None = None
    prefix_cache: PrefixCache | None = None
    counter_deltas: dict[str, float] | None = None
    config: ResolvedConfig = Field(default_factory=ResolvedConfig)
    serve: ServeResult | None = None
    clip: ClipResult | None = None
    evidence_id: str | None = None
    log_path: str | None = None
    missing_env: list[str] = Field(default_factory=list)


class _Run(BaseModel):
    """What the steps between launch and stop give the cell (each step returns an updated copy)."""

    model_config = ConfigDict(frozen=True)

    status: CellStatus = "ok"
    error: str | None = None
    ready_s: float | None = None
    served_models: list[str] | None = None
    served_model: str | None = None
    warmup_e2e_s: list[float] = Field(default_factory=list)
    prefix_cache: PrefixCache | None = None
    counter_deltas: dict[str, float] | None = None
    serve: ServeResult | None = None
    clip: ClipResult | None = None
    evidence_id: str | None = None

    def failed(self, status: CellStatus, error: str | None) -> _Run:
        return self.model_copy(update={"status": status, "error": error})


def port_in_use(port: int) -> bool:
    """True when something already accepts connections on 127.0.0.1:`port`."""
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return reaches_listener(sock, port)


def reaches_listener(sock: socket.socket, port: int) -> bool:
    """Connect `sock` to 127.0.0.1:`port`; True when another socket accepted the connection.

    A connection that the kernel happened to give `port` itself as its source port connects to
    itself (TCP simultaneous open, RFC 793 section 3.4; Linux allows it on loopback when the target
    lies in the ephemeral range) without any listener: that is not "in use".
    """
    if sock.connect_ex(("127.0.0.1", port)) != 0:
        return False
    return bool(sock.getsockname() != sock.getpeername())


def run_cell(
    engine: Engine,
    manifest: Manifest,
    inputs: CellInputs,
    options: CellOptions,
    *,
    round_no: int,
    position: int,
    probe: GpuProbe,
    clock: Clock = utc_now,
) -> CellResult:
    """Run one engine for one round; always stops the engine and returns a result."""
    cell_dir = options.run_dir / "rounds" / f"r{round_no:02d}-{position}-{engine.label}"
    cell_dir.mkdir(parents=True, exist_ok=True)
    launch = clean_env(engine.env, os.environ)
    head: dict[str, Any] = {
        "label": engine.label,
        "round": round_no,
        "position": position,
        "started_at": iso(clock()),
        "log_path": str(cell_dir / "engine.log"),
        "missing_env": launch.missing,
    }
    gpu_before = probe.used_mib()
    unlaunched = MemoryCheck(
        status="not checked", tolerance_mib=manifest.gpu_memory_tolerance_mib, reason=NOT_LAUNCHED
    )
    if port_in_use(engine.port):
        error = f"port {engine.port} already in use before launch: a ready check could reach another process"
        return CellResult(
            **head, status="launch_failed", error=error, memory=unlaunched, ended_at=iso(clock())
        )
    try:
        process = EngineProcess(engine.argv, launch.env, cell_dir / "engine.log")
    except OSError as error:
        return CellResult(
            **head, status="launch_failed", error=str(error), memory=unlaunched, ended_at=iso(clock())
        )
    try:
        run = _run(process, engine, manifest, inputs, options, cell_dir, round_no)
    finally:
        stop = process.stop(manifest.stop_timeout_s)
        memory = check_memory_returned(
            probe, gpu_before, manifest.gpu_memory_tolerance_mib, wait_s=options.memory_wait_s
        )
        log = process.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        # the argv and env it was started with are facts the gates read beside the log
        config = parse_log(log, LaunchCommand(argv=engine.argv, env=launch.env))
        (cell_dir / CONFIG_FILE).write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return CellResult(**head, **dict(run), stop=stop, memory=memory, config=config, ended_at=iso(clock()))


def _run(
    process: EngineProcess,
    engine: Engine,
    manifest: Manifest,
    inputs: CellInputs,
    options: CellOptions,
    cell_dir: Path,
    round_no: int,
) -> _Run:
    """Ready check, served model, warm-up, measurement and scrapes, while the engine runs."""
    base_url = f"http://127.0.0.1:{engine.port}"
    started = time.monotonic()
    ready = process.wait_ready(
        base_url + engine.ready_check.path,
        _startup_timeout(engine, manifest),
        engine.ready_check.interval_s,
    )
    run = _Run(ready_s=time.monotonic() - started)
    if ready != "ready":
        status: CellStatus = "not_ready" if ready == "timeout" else "exited_before_ready"
        return run.failed(status, f"ready check {engine.ready_check.path}: {ready}")
    served = served_models(base_url)
    run = run.model_copy(update={"served_models": served.ids})
    if not served.lists(engine.model.id):
        return run.failed("wrong_model", f"{engine.model.id} not served: {served.error or served.ids}")
    warm = _warm_up(engine, manifest, inputs, base_url)
    run = run.model_copy(update={"served_model": engine.model.id, "warmup_e2e_s": warm})
    if options.mode == "load" and options.reference_e2e_s is None and warm:
        options = options.model_copy(update={"reference_e2e_s": statistics.median(warm)})
    before = scrape_text(base_url)
    measured = run_measurement(
        serve_argv(engine, manifest, options, cell_dir, round_no),
        options.mode,
        cell_dir,
        manifest.serve_timeout_s,
    )
    after = scrape_text(base_url) if not process.exited() else None
    run = _with_scrapes(run, cell_dir, before, after).model_copy(
        update={"serve": measured.serve, "clip": measured.clip, "evidence_id": measured.evidence_id}
    )
    if measured.serve is None and measured.clip is None:
        run = run.failed("serve_failed", measured.error)
    if process.exited():
        run = run.failed("crashed", "engine exited during the round")
    return run


def _startup_timeout(engine: Engine, manifest: Manifest) -> float:
    """The run's startup timeout, capped by the engine's own ready-check timeout where it sets one."""
    own = engine.ready_check.timeout_s
    return manifest.startup_timeout_s if own is None else min(own, manifest.startup_timeout_s)


def _warm_up(engine: Engine, manifest: Manifest, inputs: CellInputs, base_url: str) -> list[float]:
    """Untimed warm-up: salted prompts (never seeding the prefix cache) or clips of every shape."""
    w = manifest.workload

    async def prompts() -> list[float]:
        settings = serve_client.ServeSettings(
            base_url=base_url,
            api=w.api,
            model=engine.model.id,
            max_tokens=w.max_tokens,
            extra_body=w.extra_body,
            chat_template_kwargs=w.chat_template_kwargs,
            warmup=w.warmup_requests,
            timeout_s=w.request_timeout_s,
        )
        client = Client(base_url)
        try:
            records = await serve_client.warm_up(client, settings, inputs.prompts)
        finally:
            client.close()
        return [r.e2e_s for r in records if r.ok and r.e2e_s is not None]

    async def clips() -> list[float]:
        settings = clip_client.ClipSettings(
            base_url=base_url, warmup=w.warmup_requests, timeout_s=w.request_timeout_s
        )
        client = Client(base_url)
        try:
            records = await clip_client.warm_up(client, settings, inputs.clips)
        finally:
            client.close()
        return [r.e2e_s for r in records if r.ok]

    return asyncio.run(clips() if inputs.clips else prompts())


def _parsed(text: str | None) -> dict[str, float] | None:
    if text is None:
        return None
    try:
        return parse_metrics(text)
    except ValueError:
        return None


def _with_scrapes(run: _Run, cell_dir: Path, before: str | None, after: str | None) -> _Run:
    """Keep both scrapes as files; add the prefix-cache rate and counter differences when both parse."""
    for name, text in ((METRICS_BEFORE, before), (METRICS_AFTER, after)):
        if text is not None:
            (cell_dir / name).write_text(text, encoding="utf-8")
    first, second = _parsed(before), _parsed(after)
    if before is None or after is None or first is None or second is None:
        return run
    return run.model_copy(
        update={"prefix_cache": prefix_cache(first, second), "counter_deltas": counter_deltas(before, after)}
    )


def cell_files(cell: CellResult) -> list[tuple[Path, str]]:
    """The files a cell leaves, with the role each plays in the evidence (absent ones are skipped later)."""
    if not cell.log_path:
        return []
    cell_dir = Path(cell.log_path).parent
    files = [
        (cell_dir / "engine.log", "engine log"),
        (cell_dir / CONFIG_FILE, "resolved config"),
        (cell_dir / METRICS_BEFORE, "metrics before"),
        (cell_dir / METRICS_AFTER, "metrics after"),
        (cell_dir / "serve" / "result.json", "serve result"),
        (cell_dir / REQUESTS_FILE, "serve requests"),
        (cell_dir / "clip" / "result.json", "clip result"),
    ]
    if cell.evidence_id:
        files.append((cell_dir / "evidence" / f"{cell.evidence_id}.json", "measurement evidence"))
    return files


def cell_summary(cell: CellResult) -> dict[str, Any]:
    """The cell as the run's evidence lists it in `data.cells`."""
    return {
        "label": cell.label,
        "round": cell.round,
        "position": cell.position,
        "status": cell.status,
        "error": cell.error,
        "started_at": cell.started_at,
        "ended_at": cell.ended_at,
        "served_model": cell.served_model,
        "served_models": cell.served_models,
        "stop": cell.stop.model_dump() if cell.stop else None,
        "memory": cell.memory.status if cell.memory else "not checked",
        "memory_not_checked_because": cell.memory.reason if cell.memory else None,
        "config_status": cell.config.status,
        "attention_backend": cell.config.attention_backend,
        "prefix_cache_hit_rate": cell.prefix_cache.hit_rate if cell.prefix_cache else None,
        "counter_deltas": cell.counter_deltas,
        "evidence_id": cell.evidence_id,
    }
