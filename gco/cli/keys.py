"""`gco keys create|list|revoke`: the bearer keys callers send to the global address.

A key is printed once, when it is made; the table keeps only its SHA-256 (`gco.global_access.keys`).
Every command takes `--endpoint-url` (env `AWS_ENDPOINT_URL`), `--keys-table` (env
`GCO_KEYS_TABLE_NAME`, default `gco-api-keys`) and `--output`; the table lives in the home Region
(a global table replicated to every Region in AWS).
"""

from __future__ import annotations

import getpass
from datetime import UTC, datetime

import click

from gco.cli.common import TABLE_NAME, F, check_connection, emit, emit_table, output_option
from gco.env import ENDPOINT_URL_ENV
from gco.errors import GcoInputError
from gco.global_access import keys
from gco.global_access.key_store import DEFAULT_KEYS_TABLE, KEYS_TABLE_ENV, DynamoKeyStore, create_keys_table


def _options(command: F) -> F:
    command = output_option(command)
    command = click.option(
        "--keys-table",
        envvar=KEYS_TABLE_ENV,
        default=DEFAULT_KEYS_TABLE,
        show_default=True,
        help=f"The keys table [env {KEYS_TABLE_ENV}].",
    )(command)
    return click.option(
        "--endpoint-url",
        envvar=ENDPOINT_URL_ENV,
        default=None,
        help=f"AWS endpoint URL, e.g. a local moto server [env {ENDPOINT_URL_ENV}].",
    )(command)


def open_keys(endpoint_url: str | None, keys_table: str) -> DynamoKeyStore:
    """The key store the options name, both checked before any call.

    Raises:
        GcoInputError: `--keys-table` is not a table name, or `--endpoint-url` not an http(s) URL.
    """
    if not TABLE_NAME.fullmatch(keys_table):
        raise GcoInputError("--keys-table", "must be 3-255 letters, digits, '_', '-' or '.'")
    check_connection(endpoint_url, None)
    return DynamoKeyStore.connect(endpoint_url=endpoint_url, table_name=keys_table)


def _row(record: keys.ApiKey) -> dict[str, object]:
    data = record.to_dict()
    del data["key_hash"]
    data["state"] = "revoked" if record.revoked_at else "active"
    return data


@click.group(name="keys")
def keys_group() -> None:
    """Bearer keys for the global address: create (printed once), list, revoke."""


@keys_group.command()
@click.argument("name")
@click.option(
    "--endpoint", "endpoints", multiple=True, help="An endpoint the key may call (repeat for more)."
)
@click.option("--all-endpoints", is_flag=True, help="The key may call every endpoint.")
@_options
def create(
    name: str,
    endpoints: tuple[str, ...],
    all_endpoints: bool,
    endpoint_url: str | None,
    keys_table: str,
    output: str,
) -> None:
    """Make a key NAME scoped to endpoints; print it once (only its hash is stored).

    \b
    Example:
      gco keys create ci --endpoint smol
      export OPENAI_API_KEY=$(gco keys create notebook --all-endpoints -o json | jq -r .key)
    """
    scope = keys.check_scope(list(endpoints), all_endpoints)
    keys.check_key_name(name, "NAME")
    store = open_keys(endpoint_url, keys_table)
    plaintext, record = store.create(name, scope, now=datetime.now(UTC), created_by=getpass.getuser())
    if output != "table":
        emit({**_row(record), "key": plaintext}, output)
        return
    click.echo(plaintext)
    click.echo(
        f"key {record.key_id} ({name}) for {', '.join(scope) if scope != ['*'] else 'every endpoint'}: "
        "shown once, only its hash is stored",
        err=True,
    )


@keys_group.command(name="list")
@_options
def list_keys(endpoint_url: str | None, keys_table: str, output: str) -> None:
    """Every key, newest first: id, name, scope, state (never the key).

    \b
    Example:
      gco keys list -o json
    """
    records = open_keys(endpoint_url, keys_table).list()
    if output != "table":
        emit([_row(record) for record in records], output)
        return
    emit_table(
        ["KEY_ID", "NAME", "ENDPOINTS", "STATE", "CREATED", "BY"],
        [
            [
                r.key_id,
                r.name,
                ",".join(r.endpoints),
                "revoked" if r.revoked_at else "active",
                r.created_at,
                r.created_by or "-",
            ]
            for r in records
        ],
    )


@keys_group.command()
@click.argument("key_id")
@_options
def revoke(key_id: str, endpoint_url: str | None, keys_table: str, output: str) -> None:
    """Revoke KEY_ID: refused from the next request on (a second revoke keeps the first time).

    \b
    Example:
      gco keys revoke 0123456789ab
    """
    keys.check_key_id(key_id, "KEY_ID")
    record = open_keys(endpoint_url, keys_table).revoke(key_id, datetime.now(UTC))
    if output != "table":
        emit(_row(record), output)
        return
    click.echo(f"key {record.key_id} ({record.name}) revoked at {record.revoked_at}")


@keys_group.command(name="init-table")
@_options
def init_table(endpoint_url: str | None, keys_table: str, output: str) -> None:
    """Create the keys table where it does not exist (local endpoints; the global stack owns it in AWS).

    \b
    Example:
      gco keys init-table --endpoint-url http://127.0.0.1:5000
    """
    store = open_keys(endpoint_url, keys_table)
    created = create_keys_table(store.client, keys_table)
    if output != "table":
        emit({"table": keys_table, "created": created}, output)
        return
    click.echo(f"table {keys_table}: {'created' if created else 'already exists'}")
