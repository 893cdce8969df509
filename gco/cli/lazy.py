"""A click group whose subcommands are imported when first looked up (click's documented pattern)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import click

Loader = Callable[[], click.Command]


class LazyGroup(click.Group):
    """A group that imports each subcommand through its loader the first time it is looked up.

    `lazy_subcommands` maps a subcommand's name to a function that imports and returns it; the
    loaded command is cached, so each loader runs at most once per process.
    """

    def __init__(self, *args: Any, lazy_subcommands: Mapping[str, Loader] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy_subcommands = dict(lazy_subcommands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_subcommands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command `cmd_name`, loaded on first use when it is a lazy one.

        Raises:
            TypeError: the loader returned a command of another name (a wiring mistake).
        """
        if cmd_name in self.lazy_subcommands and cmd_name not in self.commands:
            command = self.lazy_subcommands[cmd_name]()
            if command.name != cmd_name:
                raise TypeError(f"the loader of {cmd_name!r} returned the command {command.name!r}")
            self.add_command(command)
        return super().get_command(ctx, cmd_name)
