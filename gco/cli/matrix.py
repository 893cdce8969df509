"""`gco matrix validate|run|resume|destroy`: the live validation matrix (docs/matrix.md).

`validate SETTINGS` prints the run's identity; `run SETTINGS --consent` deploys, checks and
destroys the four endpoints; `resume D` continues a run from its checkpoint; `destroy D` destroys
whatever of the run is left. Exit status: 0 the matrix passed (or the settings are valid, or
nothing of the run is left), 1 a step failed (the evidence is still written) or something of the
run is left, 2 bad input (one line naming the field: a settings rule, a missing `--consent`, a
changed identity, a run URI that is not `s3://`).
The library is imported when a command runs, so `gco --help` stays quick.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from gco.cli.common import CheckedPath, connection_options, emit, open_store
from gco.endpoints import names
from gco.env import EVIDENCE_BUCKET_ENV, MATRIX_RUN_URI_ENV
from gco.validation.errors import MatrixError, MatrixFailedError, SettingsError


def _checked_uri(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from gco.validation.mirror import MirrorError, parse_uri

    if value is None:
        return None
    try:
        parse_uri(value)
    except MirrorError as error:
        raise SettingsError("--run-uri", str(error)) from None
    return value


run_uri_option = click.option(
    "--run-uri",
    envvar=MATRIX_RUN_URI_ENV,
    default=None,
    callback=_checked_uri,
    help=f"Also write each checkpoint and the evidence to s3://BUCKET/PREFIX/ [env {MATRIX_RUN_URI_ENV}].",
)


@click.group()
def matrix() -> None:
    """The live validation matrix: vLLM and TGI endpoints deployed, checked and destroyed."""


@matrix.command()
@click.argument("settings_path", metavar="SETTINGS", type=CheckedPath(path_type=Path, dir_okay=False))
def validate(settings_path: Path) -> None:
    """Check SETTINGS (JSON or YAML) and print the run's identity (contract version 2) as JSON.

    \b
    Example:
      gco matrix validate matrix.yaml
    """
    from gco.validation.service import identity_of

    click.echo(json.dumps(identity_of(settings_path), indent=2))


def _finish(result_text: str, verdict: str, summary: str, output: str) -> None:
    if output == "json":
        click.echo(result_text)
    elif output == "yaml":
        emit(json.loads(result_text), output)
    else:
        click.echo(summary)
    if verdict != "pass":
        raise MatrixFailedError(summary)


@matrix.command()
@click.argument("settings_path", metavar="SETTINGS", type=CheckedPath(path_type=Path, dir_okay=False))
@click.option("--consent", is_flag=True, help="Agree that the run deploys and destroys four endpoints.")
@click.option("--run-dir", type=CheckedPath(path_type=Path, file_okay=False), default=None)
@click.option(
    "--evidence-bucket", envvar=EVIDENCE_BUCKET_ENV, default=None, help="Also write the evidence to S3."
)
@run_uri_option
@connection_options
def run(
    settings_path: Path,
    consent: bool,
    run_dir: Path | None,
    evidence_bucket: str | None,
    run_uri: str | None,
    endpoint_url: str | None,
    table_name: str | None,
    output: str,
) -> None:
    """Deploy, check and destroy the matrix's four endpoints; progress on stderr.

    \b
    Example:
      gco matrix run matrix.yaml --consent --run-dir runs/matrix-1
    """
    from gco.validation.service import load_settings, result_json, start

    load_settings(settings_path)  # every rule before the consent flag: the first error is the settings'
    if not consent:
        raise SettingsError("--consent", "required: the run deploys and destroys endpoints")
    store = open_store(endpoint_url, table_name)
    result = start(settings_path, store, run_dir=run_dir, evidence_bucket=evidence_bucket, run_uri=run_uri)
    _finish(result_json(result), result.verdict, result.summary, output)


class RunLocation(CheckedPath):
    """A run directory, or the S3 folder a run mirrored itself to (`s3://bucket/prefix/`, a string)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from gco.validation.mirror import SCHEME

        if isinstance(value, str) and value.startswith(SCHEME):
            if names.first_unsafe(value) is not None:
                self.fail(f"{value[:80]!r} holds a control or invisible character", param, ctx)
            return value
        return super().convert(value, param, ctx)


@matrix.command()
@click.argument("run_dir", metavar="RUN_DIR", type=RunLocation(path_type=Path, file_okay=False))
@click.option(
    "--settings",
    "settings_path",
    type=CheckedPath(path_type=Path, dir_okay=False),
    default=None,
    help="Read the settings from this file [default: the file the run started with].",
)
@click.option(
    "--evidence-bucket", envvar=EVIDENCE_BUCKET_ENV, default=None, help="Also write the evidence to S3."
)
@run_uri_option
@click.option(
    "--run-dir",
    "copy_dir",
    type=CheckedPath(path_type=Path, file_okay=False),
    default=None,
    help="With RUN_DIR an s3:// folder: where to copy it [default: gco-matrix/<its last segment>].",
)
@connection_options
def resume(
    run_dir: Path | str,
    settings_path: Path | None,
    evidence_bucket: str | None,
    run_uri: str | None,
    copy_dir: Path | None,
    endpoint_url: str | None,
    table_name: str | None,
    output: str,
) -> None:
    """Continue the run in RUN_DIR from its checkpoint (refused if its settings changed).

    RUN_DIR may be the s3:// folder the run mirrored itself to (`--run-uri`): it is copied to
    `--run-dir` first, and resumed from its newest checkpoint revision.

    \b
    Example:
      gco matrix resume runs/matrix-1 --settings matrix.yaml
    """
    from gco.validation.service import result_json
    from gco.validation.service import resume as resume_run

    fetch_from = run_dir if isinstance(run_dir, str) else None
    if fetch_from is not None:
        run_dir = copy_dir or Path("gco-matrix") / fetch_from.rstrip("/").rsplit("/", 1)[-1]
    store = open_store(endpoint_url, table_name)
    result = resume_run(
        Path(run_dir),
        store,
        settings_path=settings_path,
        evidence_bucket=evidence_bucket,
        run_uri=run_uri,
        fetch_from=fetch_from,
    )
    _finish(result_json(result), result.verdict, result.summary, output)


@matrix.command()
@click.argument("run_dir", metavar="RUN_DIR", type=CheckedPath(path_type=Path, file_okay=False))
@run_uri_option
@connection_options
def destroy(
    run_dir: Path, run_uri: str | None, endpoint_url: str | None, table_name: str | None, output: str
) -> None:
    """Destroy every endpoint of the run in RUN_DIR (fenced by its owner label) and wait for the purge.

    Exit 0 when nothing of the run is left (no record with its label, no object of its lifecycles),
    1 otherwise. The steps land in the run's checkpoint.

    \b
    Example:
      gco matrix destroy runs/matrix-1
    """
    from gco.validation.service import destroy as destroy_run

    store = open_store(endpoint_url, table_name)
    inventory = destroy_run(run_dir, store, run_uri=run_uri)
    if output != "table":
        document = {"clean": inventory.passed, "detail": inventory.detail, "inventory": inventory.data}
        emit(document, output)
    else:
        click.echo(f"matrix destroy: {inventory.detail}")
    if not inventory.passed:
        raise MatrixError(f"something of the run is left: {inventory.detail}")
