"""`gco inference forget-region`: finish a deleted endpoint whose Region no reconciler serves.

Parses, calls `gco.endpoints.forget.forget_region`, prints. Refused without `--yes`.
"""

from __future__ import annotations

import getpass

import click

from gco.cli.common import STRICT_FLOAT, connection_options, emit, name_argument, open_store
from gco.cli.inference import show
from gco.endpoints.forget import DEFAULT_SILENCE_S, forget_region
from gco.errors import GcoInputError


@click.command(name="forget-region")
@name_argument
@click.option("--region", required=True, help="The deletion Region whose reconciler is gone.")
@click.option(
    "--silent-for",
    default=DEFAULT_SILENCE_S,
    show_default=True,
    type=STRICT_FLOAT,
    help="Seconds the Region's reconciler must have written nothing (at least 300).",
)
@click.option("--yes", is_flag=True, help="Confirm: acknowledge the delete on that Region's behalf.")
@connection_options
def forget_region_command(
    name: str,
    region: str,
    silent_for: float,
    yes: bool,
    endpoint_url: str | None,
    table_name: str | None,
    output: str,
) -> None:
    """Acknowledge deleted endpoint NAME's deletion for a --region no reconciler serves any more.

    Only for a deleted record, a Region that has not acknowledged it, and whose reconciler has
    written nothing for --silent-for seconds; recorded in that Region's status. The last Region
    acknowledged purges the record. Objects left in that Region's cluster are not touched.

    \b
    Example:
      gco inference forget-region chat --region ap-east-2 --yes
    """
    if not yes:
        raise GcoInputError(
            "--yes", f"forgetting {region} acknowledges a delete nobody ran there; confirm it"
        )
    done = forget_region(
        open_store(endpoint_url, table_name), name, region, silent_for=silent_for, by=getpass.getuser()
    )
    note = f"{region} acknowledged on its behalf after {done.silent_for_s:.0f} s of silence"
    if output != "table":
        emit(
            {
                "endpoint_name": name,
                "region": region,
                "purged": done.purged,
                "silent_for_s": done.silent_for_s,
            },
            output,
        )
    elif done.record is None:
        click.echo(f"{name}: {note}; purged (objects left in {region}'s cluster, if any, were not touched)")
    else:
        click.echo(f"{name}: {note}" if done.silent_for_s else f"{name}: {region} had acknowledged already")
        show(done.record, output)


COMMANDS = (forget_region_command,)
