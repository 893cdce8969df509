"""A walk-through step runs the real `gco` in a subprocess and echoes its lines as they come."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from gco import __version__
from gco.local.demo.run_step import run_gco, run_streamed


def test_each_line_is_echoed_indented_and_stdout_is_kept() -> None:
    lines: list[str] = []
    result = run_gco(["--version"], os.environ, lines.append)
    assert result.returncode == 0
    assert __version__ in result.stdout
    assert lines == [f"  {line}" for line in result.stdout.splitlines()]


def test_stderr_is_echoed_and_the_exit_status_kept() -> None:
    lines: list[str] = []
    result = run_gco(["inference", "deploy", "Bad_Name", "--image", "x"], os.environ, lines.append)
    assert result.returncode == 2
    assert "error: name: 'Bad_Name'" in result.stderr
    assert any(line.startswith("  error: name: 'Bad_Name'") for line in lines)


def test_a_line_is_echoed_while_the_command_still_runs(tmp_path: Path) -> None:
    # The child prints a line (no flush of its own) and then waits for a file that only the echo of
    # that line creates: it ends only if the line was echoed while it ran (else it is killed: -9).
    go = tmp_path / "go"
    child = (
        "import pathlib, sys, time\n"
        "print('first')\n"
        f"go = pathlib.Path({str(go)!r})\n"
        "for _ in range(600):\n"
        "    if go.exists(): break\n"
        "    time.sleep(0.05)\n"
        "else: sys.exit(5)\n"
        "print('second', file=sys.stderr)\n"
    )
    lines: list[str] = []

    def echo(line: str) -> None:
        lines.append(line)
        if line == "  first":
            go.touch()

    result = run_streamed([sys.executable, "-c", child], os.environ, echo, timeout=60)
    assert result.returncode == 0, lines
    assert lines == ["  first", "  second"]
    assert (result.stdout, result.stderr) == ("first\n", "second\n")


def test_a_command_past_its_limit_is_killed() -> None:
    child = "import time\nfor _ in range(600): time.sleep(0.1)\n"
    result = run_streamed([sys.executable, "-c", child], os.environ, lambda _: None, timeout=0.5)
    assert result.returncode == -9
