"""`gco local ...`: the embedded stack on one machine (no AWS account).

`up` starts it in the background, `env` prints the variables that point gco at it, `status` shows
each part, `down` stops them all; `demo` walks through the main job on a stack of its own.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from gco.cli.common import CheckedPath, emit, emit_table, output_option, timeout_flag
from gco.local import stack
from gco.local.demo.demo import DEFAULT_RUN_DIR, walkthrough
from gco.local.errors import DemoStepError, LocalStackError
from gco.local.region.engines import ENGINE_KINDS

F = TypeVar("F", bound=Callable[..., Any])
STATE_DIR_HELP = "Where the stack records its processes [default: $XDG_STATE_HOME/gco/local]."


def state_dir_option(command: F) -> F:
    option = click.option(
        "--state-dir", type=CheckedPath(path_type=Path, file_okay=False), default=None, help=STATE_DIR_HELP
    )
    return option(command)


@click.group()
def local() -> None:
    """The embedded local stack: a moto server and stand-in clusters on loopback."""


ENGINE_HELP = "The engine behind every replica: the fast fake, or SmolLM2-135M on llama.cpp (CPU)."


def engine_option(command: F) -> F:
    option = click.option(
        "--engine", type=click.Choice(ENGINE_KINDS), default="fake", show_default=True, help=ENGINE_HELP
    )
    return option(command)


@local.command()
@engine_option
@click.option(
    "--run-dir",
    type=CheckedPath(path_type=Path, file_okay=False),
    default=DEFAULT_RUN_DIR,
    show_default=True,
    help="Where the benchmark's evidence and report page are written (its bench/ is replaced).",
)
def demo(engine: str, run_dir: Path) -> None:
    """Deploy to two Regions, invoke both, canary and promote, scale, stop, start, update, move a
    Region, delete and purge; two rollouts decided by a paired comparison (one promoted, one rolled
    back) with their report pages; then a two-engine benchmark and its report page.

    \b
    Example:
      gco local demo
    """
    try:
        walkthrough(click.echo, engine=engine, run_dir=run_dir)
    except DemoStepError as error:
        raise click.ClickException(str(error)) from error


@local.command()
@click.option(
    "--regions", default=",".join(stack.DEFAULT_REGIONS), show_default=True, help="Regions, comma-separated."
)
@click.option(
    "--home-region",
    default=None,
    help="Where the endpoint table and its stream live [default: the first of --regions].",
)
@engine_option
@state_dir_option
def up(regions: str, home_region: str | None, engine: str, state_dir: Path | None) -> None:
    """Start the stack in the background; then `eval "$(gco local env)"`.

    \b
    Example:
      gco local up --regions us-east-1,us-west-2
    """
    chosen = [region.strip() for region in regions.split(",")]
    state = stack.up(chosen, state_dir, engine=engine, home_region=home_region)
    for part in state.parts:
        click.echo(f"started {part.name} (pid {part.pid}) {part.url}")
    click.echo(f'use it: eval "$(gco local env{_dir_flag(state_dir)})"')


def _dir_flag(state_dir: Path | None) -> str:
    return f" --state-dir {shlex.quote(str(state_dir))}" if state_dir else ""


@local.command()
@state_dir_option
def env(state_dir: Path | None) -> None:
    """Print `export` lines that point gco (and boto3) at the running stack.

    \b
    Example:
      eval "$(gco local env)"
    """
    for name, value in stack.environment(stack.require(state_dir)).items():
        click.echo(f"export {name}={shlex.quote(value)}")


@local.command()
@output_option
@timeout_flag(stack.ANSWER_TIMEOUT_S, "Seconds each process has to answer.")
@state_dir_option
def status(output: str, timeout: float, state_dir: Path | None) -> None:
    """Show every part, whether its process lives and whether it answers (exit 1 if one does not).

    \b
    Example:
      gco local status -o json
    """
    rows = stack.status(stack.require(state_dir), timeout)
    if output != "table":
        emit(rows, output)
    else:
        emit_table(
            ["PART", "PID", "ALIVE", "ANSWERS", "URL"],
            [[r["part"], r["pid"], r["alive"], r["answers"], r["url"]] for r in rows],
        )
    failing = [str(row["part"]) for row in rows if not row["answers"]]
    if failing:
        raise LocalStackError(f"not answering: {', '.join(failing)}")


@local.command()
@state_dir_option
def down(state_dir: Path | None) -> None:
    """Stop every process the stack started (also after one crashed) and free its ports.

    \b
    Example:
      gco local down
    """
    stopped = stack.down(state_dir)
    click.echo(f"stopped {', '.join(stopped)}" if stopped else "the local stack was not up")
