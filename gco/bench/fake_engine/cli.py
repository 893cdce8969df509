"""The fake engine's command line: its flags (the real engines' own among them), its start-up lines,
then the server until SIGTERM (`python -m gco.bench.fake_engine`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from gco import engines
from gco.bench import fake_engine
from gco.bench.fake_engine import wire
from gco.bench.fake_engine.server import Behaviour, FakeEngine, serve
from gco.bench.fake_engine.startup.base import EngineFlags
from gco.bench.fake_engine.startup.lines import startup_lines, styles
from gco.processes.interpreter import PYTHON


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gco.bench.fake_engine", description=fake_engine.__doc__)
    add = parser.add_argument
    add("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    add("--style", choices=list(styles()), default=engines.DEFAULT)
    add("--ttft-ms", type=float, default=5.0)
    add("--itl-ms", type=float, default=1.0)
    add("--speed", type=float, default=1.0, help="Multiplies the token rate.")
    add("--noise", type=float, default=0.0, help="Log-normal sigma of a per-request slowdown.")
    add("--drift", type=float, default=0.0, help="Slowdown added per request served.")
    add("--tokens", type=int, default=16, help="Output tokens when a request names none.")
    add("--fail-rate", type=float, default=0.0)
    add("--crash-after", type=int, default=0, help="Exit abruptly after this many requests.")
    add("--crash-once-file", default="", help="Crash only if this file is absent, then create it.")
    add("--crash-signal", default="", help="Crash by this signal (e.g. SIGSEGV) instead of exit 3.")
    add("--crash-at-start", action="store_true", help="Crash before listening (a model that cannot load).")
    add("--never-ready", action="store_true")
    add("--startup-delay", type=float, default=0.0)
    add("--ignore-sigterm", action="store_true")
    add("--leave-child", action="store_true", help="Spawn a child in its own session that outlives us.")
    add("--setting", action="append", default=[], help="key=value overriding a logged config setting.")
    # the real engines' own flags, logged as each engine logs them (gco.bench.fake_engine.startup)
    add("--enforce-eager", action="store_true", help="vLLM: CUDA graphs off.")
    add("--cpu-offload-gb", type=float, default=0.0, help="vLLM, SGLang: weights offloaded to CPU memory.")
    add("--disable-cuda-graph", action="store_true", help="SGLang: CUDA graphs off.")
    add("--enable-hierarchical-cache", action="store_true", help="SGLang: KV cache kept in host memory.")
    add("--cuda-graphs", default=None, help="TGI: CUDA graph batch sizes; 0 turns them off.")
    add("--log-line", action="append", default=[], help="An extra start-up log line.")
    add("--seed", type=int, default=0)
    add("--trace", action="store_true", help="Record arrivals and own TTFT/ITL; GET /debug/trace reads them.")
    add("--model", default=wire.FAKE_MODEL, help="The model id GET /v1/models and /info name.")
    add("--revision", default="", help="The model revision GET /info names (model_sha).")
    add(
        "--empty-output",
        action="store_true",
        help="Fault injection: answer non-streamed completions with empty text.",
    )
    add(
        "--clip-ms",
        action="append",
        default=[],
        help="SIZE=MS: clip mode, POST /v1/videos with body size SIZE takes MS (over --speed).",
    )
    add(
        "--hold-file",
        default="",
        help="Hold each streamed answer after its first token until this file exists.",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fake engine until SIGTERM (or forever, with --ignore-sigterm, until SIGKILL)."""
    args = parse_args(argv)
    flags = EngineFlags(
        model=args.model,
        port=args.port,
        enforce_eager=args.enforce_eager,
        cpu_offload_gb=args.cpu_offload_gb,
        disable_cuda_graph=args.disable_cuda_graph,
        enable_hierarchical_cache=args.enable_hierarchical_cache,
        cuda_graphs=args.cuda_graphs,
    )
    settings = dict(item.split("=", 1) for item in args.setting)
    try:
        lines = startup_lines(args.style, flags, settings, args.log_line)
    except ValueError as error:
        print(f"error: --setting: {error}", file=sys.stderr)
        return 2
    for line in lines:
        print(line, flush=True)
    if args.leave_child:
        subprocess.Popen([*PYTHON, "-c", "import time; time.sleep(120)"], start_new_session=True)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(args.startup_delay)
    crash_signal = int(signal.Signals[args.crash_signal]) if args.crash_signal else 0
    if args.crash_at_start:
        print("ERROR fake engine crashing at start on purpose", flush=True)
        wire.crash(crash_signal)
    behaviour = Behaviour(
        port=args.port,
        style=args.style,
        ttft_s=args.ttft_ms / 1000,
        itl_s=args.itl_ms / 1000,
        speed=args.speed,
        noise=args.noise,
        drift=args.drift,
        fail_rate=args.fail_rate,
        crash_after=args.crash_after,
        crash_once_file=args.crash_once_file,
        never_ready=args.never_ready,
        crash_signal=crash_signal,
        trace=args.trace,
        seed=args.seed,
        tokens=args.tokens,
        model=args.model,
        revision=args.revision,
        empty_output=args.empty_output,
        clip_s={size: float(ms) / 1000 for size, _, ms in (item.partition("=") for item in args.clip_ms)},
        hold_file=args.hold_file,
    )
    asyncio.run(serve(FakeEngine(behaviour)))
    return 0
