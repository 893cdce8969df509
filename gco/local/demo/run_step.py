"""One `gco` command of the walk-through, its output shown line by line while it runs.

A rollout or the benchmark's rounds take tens of seconds and print a progress line as each block or
cell ends; echoing the command's lines as they come (not all at once when it exits) is what keeps the
walk-through's progress visible throughout. The child runs unbuffered (`PYTHONUNBUFFERED`) so its
stdout reaches the pipe a line at a time; stderr is read on a second thread, both echoed under one
lock so lines are never interleaved mid-line. Bounded: a command still running after `timeout`
seconds is killed and reported as exit -9.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import IO

from gco.processes.interpreter import python_module

STEP_TIMEOUT_S = 900.0  # the longest step (the benchmark's rounds on a loaded machine) and then some


def run_gco(
    arguments: Sequence[str],
    env: Mapping[str, str],
    echo: Callable[[str], None],
    timeout: float = STEP_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """Run `gco arguments` with `env`, echoing each line of its stderr and stdout as it comes.

    Returns:
        The exit status and the whole stdout and stderr (stdout is what steps read paths from).
    """
    return run_streamed(python_module("gco.cli", *arguments), env, echo, timeout)


def run_streamed(
    argv: Sequence[str],
    env: Mapping[str, str],
    echo: Callable[[str], None],
    timeout: float = STEP_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` (a Python program: it is told to run unbuffered), echoing each line of its stderr
    and stdout, indented, as it comes; killed after `timeout` seconds (exit -9).

    Returns:
        The exit status and the whole stdout and stderr.
    """
    lock = threading.Lock()
    with subprocess.Popen(
        list(argv),
        env={**env, "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        killer = threading.Timer(timeout, process.kill)
        killer.start()
        assert process.stdout is not None
        assert process.stderr is not None
        errors: list[str] = []
        reader = threading.Thread(target=_pump, args=(process.stderr, errors, echo, lock), daemon=True)
        reader.start()
        output: list[str] = []
        _pump(process.stdout, output, echo, lock)
        reader.join()
        code = process.wait()
        killer.cancel()
    return subprocess.CompletedProcess(list(argv), code, "".join(output), "".join(errors))


def _pump(stream: IO[str], kept: list[str], echo: Callable[[str], None], lock: threading.Lock) -> None:
    for line in stream:
        kept.append(line)
        with lock:
            echo(f"  {line.rstrip()}")
