"""Shared pieces of the `gco` command: connection options, output, and input parsing helpers.

Every command takes `--endpoint-url`, `--table` and `--output`; errors become one line on stderr.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
import yaml

from gco.endpoints import EndpointStore
from gco.endpoints.errors import InvalidSpecError
from gco.env import DEFAULT_TABLE, TABLE_ENV

F = TypeVar("F", bound=Callable[..., Any])


def connection_options(command: F) -> F:
    """Add --endpoint-url, --table and --output to a command."""
    command = click.option(
        "--output",
        "-o",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="table for people, json for scripts.",
    )(command)
    command = click.option(
        "--table",
        "table_name",
        envvar=TABLE_ENV,
        default=None,
        help=f"Endpoint table name [env {TABLE_ENV}; default {DEFAULT_TABLE}].",
    )(command)
    return click.option(
        "--endpoint-url",
        envvar="AWS_ENDPOINT_URL",
        default=None,
        help="AWS endpoint URL, e.g. a local moto server [env AWS_ENDPOINT_URL].",
    )(command)


def open_store(endpoint_url: str | None, table_name: str | None) -> EndpointStore:
    return EndpointStore.connect(endpoint_url=endpoint_url, table_name=table_name)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True))


def emit_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(value) for value in row] for row in rows]
    widths = [max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(headers)]
    click.echo("  ".join(header.ljust(width) for header, width in zip(headers, widths, strict=True)).rstrip())
    for row in cells:
        click.echo("  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip())


def load_spec_file(path: Path) -> dict[str, Any]:
    """Read a whole spec from a JSON or YAML file.

    Raises:
        InvalidSpecError: unreadable, unparsable, or not a mapping (field `--spec`).
    """
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidSpecError("--spec", f"cannot read {path}: {error}") from None
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        detail = str(error).splitlines()[0]
        raise InvalidSpecError("--spec", f"{path} is not valid JSON/YAML: {detail}") from None
    if not isinstance(data, dict):
        raise InvalidSpecError("--spec", f"{path} must hold a mapping of spec fields")
    return data


def parse_pairs(values: Sequence[str], option: str) -> dict[str, str]:
    """`KEY=VALUE` options as a mapping."""
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key:
            raise InvalidSpecError(option, f"{value!r} is not KEY=VALUE")
        pairs[key] = item
    return pairs
