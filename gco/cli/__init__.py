"""The `gco` command: endpoint records, the local stack, the live validation matrix and bench.

Exit status: 0 on success, 2 on bad input (one line naming the field), 1 on runtime failure.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import click

from gco import __version__
from gco.cli.lazy import LazyGroup
from gco.errors import GcoError


def _inference() -> click.Command:
    from gco.cli.forget import COMMANDS as FORGET_COMMANDS
    from gco.cli.inference import inference
    from gco.cli.rollout import COMMANDS as ROLLOUT_COMMANDS
    from gco.cli.traffic import COMMANDS as TRAFFIC_COMMANDS

    for command in (*TRAFFIC_COMMANDS, *FORGET_COMMANDS, *ROLLOUT_COMMANDS):
        inference.add_command(command)
    return inference


def _local() -> click.Command:
    from gco.cli.local import local

    return local


def _matrix() -> click.Command:
    from gco.cli.matrix import matrix

    return matrix


def _bench() -> click.Command:
    from gco.cli.bench import bench

    return bench


def _doctor() -> click.Command:
    from gco.cli.doctor import doctor

    return doctor


# Each group is imported when it is run (or listed by --help): `gco inference list` need not load
# the benchmark's, the local stack's or the matrix's modules, which cost seconds of start-up.
SUBCOMMANDS = {
    "inference": _inference,
    "local": _local,
    "matrix": _matrix,
    "bench": _bench,
    "doctor": _doctor,
}


# `-h` as well as `--help` on every command (a context setting the subcommands inherit).
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


@click.group(cls=LazyGroup, lazy_subcommands=SUBCOMMANDS, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", "-V", prog_name="gco")
@click.option("--verbose", "-v", is_flag=True, help="Log what gco does to stderr.")
def cli(verbose: bool) -> None:
    """gco: LLM inference endpoints on EKS GPU node groups across AWS Regions."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; map errors to one line on stderr and the documented exit status."""
    try:
        return _main(argv)
    finally:
        # A --request-timeout bounds this command's requests only. gco.aws is looked up, not
        # imported: a command that made no AWS client (`gco --help`) does not load botocore.
        clients = sys.modules.get("gco.aws")
        if clients is not None:
            clients.reset_request_bounds()


def _main(argv: Sequence[str] | None) -> int:
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="gco", standalone_mode=False)
    except click.exceptions.Exit as done:
        return int(done.exit_code or 0)
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        return 1
    except click.UsageError as error:
        click.echo(f"error: {error.format_message()}", err=True)
        return 2
    except click.ClickException as error:
        click.echo(f"error: {error.format_message()}", err=True)
        return 1
    except GcoError as error:
        click.echo(f"error: {error}", err=True)
        return error.exit_code
    return 0


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
