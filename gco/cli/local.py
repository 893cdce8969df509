"""`gco local ...`: the embedded stack on one machine (no AWS account)."""

from __future__ import annotations

import click

from gco.local.demo import DemoStepError, walkthrough


@click.group()
def local() -> None:
    """The embedded local stack: a moto server on loopback standing in for AWS."""


@local.command()
def demo() -> None:
    """Walk through deploy, scale, stop, start, update, Regions and delete against a local server."""
    try:
        walkthrough(click.echo)
    except DemoStepError as error:
        raise click.ClickException(str(error)) from error
