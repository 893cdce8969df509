"""The CPU engine's set-up tells the walk-through it started early when the engine is installed.

A first `make demo` starts the walk-through while llama.cpp still compiles (`setup_env`: the lock and
gco are installed by then); the walk-through's first steps run only fake engines, and before its
first step on the CPU engine it waits here until the set-up writes the file named by `READY_ENV`:
`ok` once the engine and the model are installed, or `failed: <why>` where the compile or the
install failed (the walk-through then stops with that reason). Standard library only: the set-up
imports this before anything is installed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from gco.local.errors import SetupError

READY_ENV = "GCO_ENGINE_READY_FILE"  # the file the set-up writes once the CPU engine is installed (or failed)
OK = "ok"
FAILED = "failed: "
WAIT_EVERY_S = 0.5
PROGRESS_EVERY_S = 15.0
# Bounded far above a first set-up (3 minutes on a quiet 2-core machine, 40 under heavy load:
# docs/benchmarks.md); the wait also ends at once when the set-up that writes the file is gone.
TIMEOUT_S = 7200.0


def mark(path: Path, failure: str | None) -> None:
    """Record the engine's set-up: installed (`failure` None) or failed, written whole (a rename)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(OK if failure is None else FAILED + failure, encoding="utf-8")
    os.replace(partial, path)


def await_engine(
    path: Path,
    echo: Callable[[str], None],
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    parent: Callable[[], int] = os.getppid,
    timeout_s: float = TIMEOUT_S,
) -> float:
    """Wait until the set-up (this process's parent) marks the engine installed, with a progress line
    when the wait starts, every PROGRESS_EVERY_S seconds and when it ends.

    Returns:
        The seconds waited.

    Raises:
        SetupError: the set-up marked the engine failed (its reason), the set-up is gone, or the
            wait passed `timeout_s`.
    """
    started = last = clock()
    setup = parent()
    echo(f"  ... waiting for the CPU engine's set-up (llama.cpp compiles beside the walk-through): {path}")
    while True:
        state = path.read_text(encoding="utf-8") if path.exists() else None
        now = clock()
        if state == OK:
            echo(f"  ... the CPU engine is installed: waited {now - started:.0f} s")
            return now - started
        if state is not None:
            raise SetupError(f"the CPU engine's set-up failed: {state.removeprefix(FAILED)}")
        if parent() != setup:
            raise SetupError("the set-up that installs the CPU engine is gone (its process ended)")
        if now - started > timeout_s:
            raise SetupError(f"timed out after {timeout_s:.0f} s waiting for the CPU engine's set-up")
        if now - last >= PROGRESS_EVERY_S:
            echo(f"  ... still waiting for the CPU engine's set-up ({now - started:.0f} s)")
            last = now
        sleep(WAIT_EVERY_S)
