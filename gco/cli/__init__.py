"""The `gco` command: endpoint records, the local stack, the live validation matrix and bench.

Exit status: 0 on success, 2 on bad input (one line naming the field), 1 on runtime failure.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Sequence

import click

from gco import __version__
from gco.cli.lazy import LazyGroup
from gco.cli.output import GuardedOutput
from gco.errors import GcoError


def _inference() -> click.Command:
    from gco.cli.forget import COMMANDS as FORGET_COMMANDS
    from gco.cli.inference import inference
    from gco.cli.traffic import COMMANDS as TRAFFIC_COMMANDS

    for command in (*TRAFFIC_COMMANDS, *FORGET_COMMANDS):
        inference.add_command(command)
    # `rollout` only when run (or listed): its analysis (numpy, the statistics) is about a fifth of
    # every other inference command's start-up, and the walk-through runs some thirty of them.
    inference.lazy_subcommands["rollout"] = _rollout
    return inference


def _rollout() -> click.Command:
    from gco.cli.rollout import rollout

    return rollout


def _local() -> click.Command:
    from gco.cli.local import local

    return local


def _matrix() -> click.Command:
    from gco.cli.matrix import matrix

    return matrix


def _bench() -> click.Command:
    from gco.cli.bench import bench

    return bench


def _keys() -> click.Command:
    from gco.cli.keys import keys_group

    return keys_group


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
    "keys": _keys,
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
    """Run the CLI; map errors to one line on stderr and the documented exit status.

    The command's output goes through `GuardedOutput` (`gco.cli.output`): a closed, full or broken
    standard output is one line and exit 1, for every command.
    """
    real = sys.stdout
    sys.stdout = GuardedOutput(real)
    try:
        return _main(argv)
    finally:
        sys.stdout = real
        # A --request-timeout bounds this command's requests only. gco.aws is looked up, not
        # imported: a command that made no AWS client (`gco --help`) does not load botocore.
        clients = sys.modules.get("gco.aws")
        if clients is not None:
            clients.reset_request_bounds()


def _main(argv: Sequence[str] | None) -> int:
    try:
        try:
            cli.main(args=list(argv) if argv is not None else None, prog_name="gco", standalone_mode=False)
        finally:
            sys.stdout.flush()  # a full device or a broken pipe shows at the flush: an OutputError
    except click.exceptions.Exit as done:
        return int(done.exit_code or 0)
    except click.exceptions.Abort:
        return _failed("aborted", 1)
    except click.UsageError as error:
        return _failed(error.format_message(), 2)
    except click.ClickException as error:
        return _failed(error.format_message(), 1)
    except GcoError as error:
        return _failed(str(error), error.exit_code)
    except OSError as error:  # a file the command had to write or read: disk full, permissions
        where = f": {error.filename}" if error.filename else ""
        return _failed(f"{error.strerror or error}{where}", 1)
    return 0


def _failed(message: str, code: int) -> int:
    """Print `error: message` on stderr (unless stderr itself cannot be written) and return `code`."""
    with contextlib.suppress(OSError, ValueError):
        click.echo(f"error: {message}", err=True)
    return code


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
