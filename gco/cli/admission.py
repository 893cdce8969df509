"""`--allow-unvalidated REASON` and the admission hook of `deploy`, `update`, `canary`, `regions`.

The commands build the hook here (`gco.admission.from_environment`: the deployment's policy, its
evidence index, the registry resolver), hand it to the fenced write, and print its warnings on
stderr once the write landed (docs/cli.md, "Validated builds").
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from typing import Any, TypeVar

import click

from gco.admission import Admitter, from_environment
from gco.admission.admit import Command

F = TypeVar("F", bound=Callable[..., Any])


def allow_unvalidated_option(command: F) -> F:
    """`--allow-unvalidated REASON`: let in an image without passing matrix evidence, keeping why."""
    return click.option(
        "--allow-unvalidated",
        "allow_unvalidated",
        default=None,
        metavar="REASON",
        help="Under the validation policy enforce, run an image without passing matrix evidence in a "
        "target Region; REASON is kept in the record with who and when.",
    )(command)


def admitter(command: Command, endpoint_url: str | None, reason: str | None) -> Admitter:
    """The admission hook of `command`; the OS user is who admitted.

    Raises:
        InvalidSpecError: a bad reason (exit 2).
    """
    return from_environment(command, endpoint_url=endpoint_url, reason=reason, by=getpass.getuser())


def warn(hook: Admitter) -> None:
    """The hook's warnings (policy warn) on stderr."""
    for line in hook.warnings:
        click.echo(line, err=True)
