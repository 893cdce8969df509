"""`gco local ...`: the embedded stack on one machine (no AWS account).

`up` starts it in the background, `env` prints the variables that point gco at it, `status` shows
each part, `down` stops them all; `demo` walks through the main job on a stack of its own.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from gco.cli.common import CheckedPath, emit, emit_table, output_option, timeout_flag
from gco.endpoints.admissions import POLICIES, Policy
from gco.endpoints.names import endpoint_name, region_list
from gco.endpoints.operations import fresh
from gco.errors import GcoInputError
from gco.inference.invoke import API_KEY_ENV, GLOBAL_URL_ENV
from gco.local import stack
from gco.local.demo.demo import DEFAULT_RUN_DIR, walkthrough
from gco.local.errors import DemoStepError, LocalStackError
from gco.local.front import process as front_process
from gco.local.llama.engine_ready import READY_ENV
from gco.local.processes.statefiles import StackState
from gco.local.region import faults
from gco.local.region.engines import ENGINE_KINDS
from gco.rollout.execution import STATE_MACHINE_ENV

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
@click.option(
    "--from-source",
    is_flag=True,
    help="Reconcile with the source tree's code in this process, not the synthesized app's functions.",
)
def demo(engine: str, run_dir: Path, from_source: bool) -> None:
    """Deploy to two Regions, invoke both, canary and promote, scale, stop, start, update, move a
    Region, delete and purge; two rollouts decided by a paired comparison (one promoted, one rolled
    back) with their report pages; then a two-engine benchmark and its report page.

    \b
    Example:
      gco local demo
    """
    try:
        # Set by the Makefile's set-up when it starts the walk while llama.cpp still compiles.
        ready = os.environ.get(READY_ENV)
        walkthrough(
            click.echo,
            engine=engine,
            run_dir=run_dir,
            engine_ready_file=Path(ready) if ready else None,
            from_source=from_source,
        )
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
@click.option(
    "--validation-policy",
    type=click.Choice(POLICIES),
    default="off",
    show_default=True,
    help="What deploy, update, canary and regions --add do with an image without passing matrix "
    "evidence in a Region: nothing, warn, or refuse (as cdk.json's validation_policy in AWS).",
)
@click.option(
    "--assembly",
    type=CheckedPath(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A synthesized app (cdk.out) to run the functions of: every Region's reconciler and sweep, the "
    "rollout wing and the global address's authorizer from their assets, under their roles, IAM "
    "enforced (docs/local.md) [default: the app synthesized for --regions, once per source tree].",
)
@click.option(
    "--from-source",
    is_flag=True,
    help="Run gco's functions from the source tree in the stack's own processes, not from a synthesized "
    "app: no synth, but nothing of what deploys is run (docs/local.md).",
)
@state_dir_option
def up(
    regions: str,
    home_region: str | None,
    engine: str,
    validation_policy: Policy,
    assembly: Path | None,
    from_source: bool,
    state_dir: Path | None,
) -> None:
    """Start the stack in the background; then `eval "$(gco local env)"`.

    It runs the app as synthesized (the functions from their assets, under their roles, IAM enforced):
    the app is synthesized for --regions on the first up of a source tree and kept (tens of seconds
    once, milliseconds after); --assembly DIR runs a given one, --from-source none.

    \b
    Example:
      gco local up --regions us-east-1,us-west-2 --validation-policy enforce
    """
    chosen = region_list([region.strip() for region in regions.split(",")], "--regions")
    if assembly is not None and from_source:
        raise GcoInputError("--from-source", "runs no synthesized app: give it or --assembly, not both")
    state = stack.up(
        chosen,
        state_dir,
        engine=engine,
        home_region=home_region,
        validation_policy=validation_policy,
        assembly=assembly,
        synthesize=assembly is None and not from_source,
    )
    if state.assembly is not None:
        click.echo(f"running the app synthesized in {state.assembly}")
    for part in state.parts:
        click.echo(f"started {part.name} (pid {part.pid}) {part.url}")
    click.echo(f'use it: eval "$(gco local env{_dir_flag(state_dir)})"')


def _dir_flag(state_dir: Path | None) -> str:
    return f" --state-dir {shlex.quote(str(state_dir))}" if state_dir else ""


@local.command()
@state_dir_option
@click.option("--with-key", is_flag=True, help="Also make a key for the global address and export it.")
def env(state_dir: Path | None, with_key: bool) -> None:
    """Print `export` lines that point gco (and boto3) at the running stack, its global address
    included (GCO_GLOBAL_URL); `--with-key` also exports a key for it (GCO_API_KEY, OPENAI_API_KEY):
    the one an earlier `--with-key` made for this stack while it is valid, else a new one.

    \b
    Example:
      eval "$(gco local env --with-key)"
    """
    state = stack.require(state_dir)
    for name, value in stack.environment(state).items():
        click.echo(f"export {name}={shlex.quote(value)}")
    if with_key:
        directory = state_dir or stack.default_state_dir()
        plaintext, made = front_process.env_key(
            directory, state.endpoint_url, state.home_region, state.keys_table, credentials=state.credentials
        )
        click.echo(f"# {'a new' if made else 'the same'} all-endpoint key, kept in {directory}")
        for name in (API_KEY_ENV, "OPENAI_API_KEY"):
            click.echo(f"export {name}={shlex.quote(plaintext)}")
    elif state.global_url:
        click.echo(
            f"# a key for {GLOBAL_URL_ENV}: export {API_KEY_ENV}=$(gco keys create NAME --all-endpoints)"
        )
    if state.rollout_machine:
        machine = f"{STATE_MACHINE_ENV}={shlex.quote(state.rollout_machine)}"
        click.echo(f"# rollouts by the state machine: export {machine} (or --via-step-functions)")


def _region_of(state: StackState, region: str) -> str:
    if region not in state.regions:
        raise GcoInputError(
            "region", f"{region[:40]!r} is not a Region of the stack ({', '.join(state.regions)})"
        )
    return region


def _served_in(state: StackState, region: str, names: list[str]) -> None:
    """Refuse a name that is no endpoint of the stack, or none that `region` serves: its replicas there
    cannot be made unready, and a fault that fails nothing must not look as if it had.

    Raises:
        EndpointNotFoundError: no endpoint has one of `names`.
        GcoInputError: one of them is not served in `region`.
    """
    store = stack.store(state)
    for name in names:
        record = fresh(store, name)
        if region not in record.target_regions:
            served = ", ".join(record.target_regions) or "none"
            raise GcoInputError("--unready", f"{name!r} is not served in {region} (its Regions: {served})")


@local.command(name="fail-region")
@click.argument("region")
@click.option(
    "--unready",
    "unready",
    multiple=True,
    help="Make this endpoint's replicas unready there (repeat for more) instead of stopping its proxy.",
)
@state_dir_option
def fail_region(region: str, unready: tuple[str, ...], state_dir: Path | None) -> None:
    """Fail REGION on purpose: stop its proxy (or, with --unready, fail its endpoints' readiness).

    \b
    Example:
      gco local fail-region us-east-1
      gco local fail-region us-west-2 --unready smol
    """
    directory = state_dir or stack.default_state_dir()
    state = stack.require(state_dir)
    region = _region_of(state, region)
    names = [endpoint_name(name, "--unready") for name in unready]
    _served_in(state, region, names)
    now = faults.current(directory, region)
    wanted = (
        now.model_copy(update={"unready": sorted({*now.unready, *names})})
        if names
        else now.model_copy(update={"proxy_down": True})
    )
    faults.request(directory, region, wanted)
    what = f"replicas of {', '.join(names)} unready" if names else "proxy stopped"
    click.echo(f"{region}: {what}")


@local.command(name="restore-region")
@click.argument("region")
@click.option("--unready", "unready", multiple=True, help="Only make this endpoint's replicas ready again.")
@state_dir_option
def restore_region(region: str, unready: tuple[str, ...], state_dir: Path | None) -> None:
    """Lift the faults of REGION (all of them, or with --unready only those endpoints').

    \b
    Example:
      gco local restore-region us-east-1
    """
    directory = state_dir or stack.default_state_dir()
    region = _region_of(stack.require(state_dir), region)
    names = [endpoint_name(name, "--unready") for name in unready]
    now = faults.current(directory, region)
    wanted = (
        now.model_copy(update={"unready": [n for n in now.unready if n not in names]})
        if names
        else faults.Faults()
    )
    faults.request(directory, region, wanted)
    click.echo(f"{region}: {'restored' if wanted == faults.Faults() else wanted.model_dump_json()}")


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
    rows = stack.status(stack.require(state_dir), timeout, state_dir)
    if output != "table":
        emit([row.model_dump() for row in rows], output)
    else:
        emit_table(
            ["PART", "PID", "ALIVE", "ANSWERS", "URL"],
            [[r.part, r.pid, r.alive, r.answers, r.url] for r in rows],
        )
    failing = [_failing(row) for row in rows if not row.answers]
    if failing:
        raise LocalStackError(f"not answering: {', '.join(failing)}")


DOWN = "gco local down"


def _failing(row: stack.PartStatus) -> str:
    """A part that does not answer, with the groups its gone process left running (a Region's engines
    and nginx keep passing `/healthz` and relaying errors until `gco local down` stops them)."""
    if not row.orphans:
        return row.part
    groups = ", ".join(str(pid) for pid in row.orphans)
    return (
        f"{row.part} (its process is gone; its engines and nginx live on as groups {groups}: gco local down)"
    )


@local.command()
@state_dir_option
def down(state_dir: Path | None) -> None:
    """Stop every process the stack started (also after one crashed) and free its ports; a recorded
    pid that now names another process is skipped, and said so.

    \b
    Example:
      gco local down
    """
    report = stack.down(state_dir)
    for skipped in report.skipped:
        click.echo(f"skipped {skipped}")
    if report.stopped:
        click.echo(f"stopped {', '.join(report.stopped)}")
    elif not report.skipped:
        click.echo("the local stack was not up")
