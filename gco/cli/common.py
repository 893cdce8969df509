"""Shared pieces of the `gco` command: connection options, output, and input parsing helpers.

Every command takes `--endpoint-url`, `--table` and `--output`; errors become one line on stderr.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

import click
import yaml

from gco import aws
from gco.endpoints import EndpointStore, names
from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.names import ALLOW_NEW_REGIONS_ENV
from gco.env import DEFAULT_TABLE, ENDPOINT_URL_ENV, TABLE_ENV

F = TypeVar("F", bound=Callable[..., Any])


REQUEST_TIMEOUT_S = 30.0
MAX_REQUEST_TIMEOUT = 3600.0


def _bound_requests(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if not math.isfinite(value) or not 0 < value <= MAX_REQUEST_TIMEOUT:
        raise click.BadParameter(f"must be a number of seconds above 0 and at most {MAX_REQUEST_TIMEOUT:g}")
    aws.bound_requests(value)
    return value


def connection_options(command: F) -> F:
    """Add --endpoint-url, --table, --request-timeout and --output to a command."""
    command = click.option(
        "--request-timeout",
        default=REQUEST_TIMEOUT_S,
        show_default=True,
        type=STRICT_FLOAT,
        callback=_bound_requests,
        expose_value=False,
        help="Seconds one AWS request may take in all, its retry included (two attempts at most), "
        "before the command fails naming it.",
    )(command)
    command = output_option(command)
    command = click.option(
        "--table",
        "table_name",
        envvar=TABLE_ENV,
        default=None,
        help=f"Endpoint table name [env {TABLE_ENV}; default {DEFAULT_TABLE}].",
    )(command)
    return click.option(
        "--endpoint-url",
        envvar=ENDPOINT_URL_ENV,
        default=None,
        help=f"AWS endpoint URL, e.g. a local moto server [env {ENDPOINT_URL_ENV}].",
    )(command)


TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}")
ENDPOINT_URL = re.compile(r"https?://[A-Za-z0-9.\-\[\]:]+(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?")


def open_store(
    endpoint_url: str | None, table_name: str | None, *, allow_new_regions: bool | None = None
) -> EndpointStore:
    """A store on the table the options name; both options checked before any call.

    Raises:
        InvalidSpecError: `--table` is not a DynamoDB table name or `--endpoint-url` not an
            http(s) URL.
    """
    check_connection(endpoint_url, table_name)
    return EndpointStore.connect(
        endpoint_url=endpoint_url, table_name=table_name, allow_new_regions=allow_new_regions
    )


def check_connection(endpoint_url: str | None, table_name: str | None) -> None:
    """Refuse a table name or endpoint URL that botocore would choke on, naming the option.

    Raises:
        InvalidSpecError: `--table` is not a DynamoDB table name, or `--endpoint-url` is not an http(s) URL
            with a host.
    """
    if table_name is not None and not TABLE_NAME.fullmatch(table_name):
        raise InvalidSpecError("--table", "must be 3-255 letters, digits, '_', '-' or '.'")
    if endpoint_url is not None:
        _check_url_parts(endpoint_url)
    if endpoint_url is not None and (len(endpoint_url) > 2048 or not ENDPOINT_URL.fullmatch(endpoint_url)):
        raise InvalidSpecError("--endpoint-url", "must be an http:// or https:// URL")
    if endpoint_url is not None:
        try:  # what botocore will parse: an unclosed IPv6 bracket or a port beyond 65535 raises ValueError
            parts = urlsplit(endpoint_url)
            parts.port  # noqa: B018 - parsed for its ValueError
        except ValueError as error:
            raise InvalidSpecError("--endpoint-url", f"is not a valid URL ({error})") from None
        if not parts.hostname:
            raise InvalidSpecError("--endpoint-url", "names no host")


def _check_url_parts(url: str) -> None:
    """The misleading cases of `--endpoint-url`, each named: not http(s), a user or password in it,
    a host that is not ASCII (each was "not an http(s) URL" before).

    Raises:
        InvalidSpecError: on `--endpoint-url`.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise InvalidSpecError("--endpoint-url", "must be an http:// or https:// URL")
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    if "@" in authority:
        raise InvalidSpecError(
            "--endpoint-url",
            f"holds a user or password ({scheme}://***@...): AWS credentials come from the environment "
            "or a profile, never from the URL",
        )
    if not authority.isascii():
        host = authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority
        try:
            ascii_form = host.encode("idna").decode("ascii")
        except UnicodeError:
            ascii_form = ""
        hint = f" ({ascii_form})" if ascii_form else ""
        raise InvalidSpecError(
            "--endpoint-url", f"the host {host[:80]!r} is not ASCII: write it in its IDNA form{hint}"
        )


OUTPUTS = ("table", "json", "yaml")


def output_option(command: F) -> F:
    """`-o/--output table|json|yaml`, as kubectl and the AWS CLI spell it."""
    return click.option(
        "--output",
        "-o",
        type=click.Choice(OUTPUTS),
        default="table",
        show_default=True,
        help="table for people; json or yaml for scripts (the same fields).",
    )(command)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True))


def emit(data: Any, output: str) -> None:
    """`data` as `output` says: json, or yaml (block style, keys sorted, as json's)."""
    if output == "yaml":
        click.echo(
            yaml.safe_dump(data, sort_keys=True, default_flow_style=False, allow_unicode=True), nl=False
        )
    else:
        emit_json(data)


def emit_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(value) for value in row] for row in rows]
    widths = [max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(headers)]
    click.echo("  ".join(header.ljust(width) for header, width in zip(headers, widths, strict=True)).rstrip())
    for row in cells:
        click.echo("  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip())


MAX_PAIRS = 256


def parse_pairs(values: Sequence[str], option: str) -> dict[str, str]:
    """`KEY=VALUE` options as a mapping; a key given twice is refused, naming it.

    Raises:
        InvalidSpecError: too many pairs, a value without `=`, or a key given twice (field `option`).
    """
    if len(values) > MAX_PAIRS:
        raise InvalidSpecError(option, f"at most {MAX_PAIRS} may be given (got {len(values)})")
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key:
            raise InvalidSpecError(option, f"{value[:80]!r} is not KEY=VALUE")
        if key in pairs:
            raise InvalidSpecError(option, f"duplicate key {key[:64]!r}")
        pairs[key] = item
    return pairs


class StrictInt(click.ParamType[int]):
    """An integer written as digits only, the one parser of every integer option: `int()` would
    also take " 3\n", "1_000" or "007" (and click's INT does), or 5,000 digits it then cannot print.
    `low`/`high` bound it (inclusive), as click's IntRange would."""

    name = "integer"
    pattern = re.compile(r"[+-]?(0|[1-9][0-9]{0,8})")

    def __init__(self, low: int | None = None, high: int | None = None) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif not isinstance(value, str) or not self.pattern.fullmatch(value):
            self.fail(f"{str(value)[:40]!r} is not an integer", param, ctx)
        else:
            number = int(value)
        if (self.low is not None and number < self.low) or (self.high is not None and number > self.high):
            self.fail(
                f"{number} is not from {self.low} to {self.high}".replace(" to None", " up"), param, ctx
            )
        return number


class StrictFloat(click.ParamType[float]):
    """A decimal number written plainly, the one parser of every number option: `float()` would
    also take "nan", "inf" or " 5\n". `positive` refuses 0 and below."""

    name = "number"
    # Digits, a fraction and an exponent as Python's repr writes a float (a program passes
    # `repr(x)` on: 0.061869047000072896, 1e-05); never nan, inf, spaces or underscores.
    pattern = re.compile(r"[+-]?([0-9]{1,15}(\.[0-9]{0,20})?|\.[0-9]{1,20})([eE][+-]?[0-9]{1,3})?")

    def __init__(self, *, positive: bool = False) -> None:
        self.positive = positive

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float | int) and not isinstance(value, bool):
            number = float(value)
        elif not isinstance(value, str) or not self.pattern.fullmatch(value):
            self.fail(f"{str(value)[:40]!r} is not a plain decimal number", param, ctx)
        else:
            number = float(value)
        if not math.isfinite(number):  # 1e999
            self.fail(f"{str(value)[:40]!r} is not a finite number", param, ctx)
        if self.positive and not number > 0:
            self.fail(f"{number:g} is not above 0", param, ctx)
        return number


PATH_MAX, NAME_MAX = 4096, 255  # Linux's limits on a path and on one of its names (limits.h)


class CheckedPath(click.Path):
    """click's Path, refusing a path with a NUL or another control character before click stats it
    (os.stat raises ValueError on a NUL byte, which click does not catch: a traceback, not exit 2)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and names.first_unsafe(value) is not None:
            self.fail(f"{value[:80]!r} holds a control or invisible character", param, ctx)
        if isinstance(value, str) and (
            len(value) > PATH_MAX or any(len(part) > NAME_MAX for part in value.split("/"))
        ):  # the kernel's ENAMETOOLONG, which os.stat and open raise as an OSError click lets through
            self.fail(f"{value[:60]!r}... is longer than a path may be ({len(value)} characters)", param, ctx)
        return super().convert(value, param, ctx)


STRICT_INT = StrictInt()
STRICT_FLOAT = StrictFloat()
MAX_TIMEOUT = 7 * 24 * 3600.0


def timeout_flag(default: float, help_text: str) -> Callable[[F], F]:
    """`--timeout SECONDS` (default `default`), checked when parsed, so a bad value (negative, nan,
    inf, beyond a week) stops the command before any call or write."""

    def check(ctx: click.Context, param: click.Parameter, value: float) -> float:
        if not math.isfinite(value) or not 0 <= value <= MAX_TIMEOUT:
            raise click.BadParameter(f"must be a number of seconds from 0 to {MAX_TIMEOUT:g}")
        return value

    def decorate(command: F) -> F:
        return click.option(
            "--timeout", default=default, show_default=True, type=STRICT_FLOAT, callback=check, help=help_text
        )(command)

    return decorate


timeout_option = timeout_flag(1800.0, "Seconds to wait.")


def name_argument(command: F) -> F:
    """The NAME argument, checked as an endpoint name when parsed (exit 2 naming `name`)."""

    def check(ctx: click.Context, param: click.Parameter, value: str) -> str:
        return names.endpoint_name(value)

    return click.argument("name", callback=check)(command)


def allow_new_regions_option(command: F) -> F:
    return click.option(
        "--allow-new-regions",
        is_flag=True,
        default=None,
        help="Accept a Region newer than this gco's botocore if it fits an AWS partition's pattern "
        f"[env {ALLOW_NEW_REGIONS_ENV}=1].",
    )(command)
