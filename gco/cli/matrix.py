"""`gco matrix validate|run|resume`: the live validation matrix (docs/matrix.md).

`validate SETTINGS` prints the run's identity; `run SETTINGS --consent` deploys, checks and
destroys the four endpoints; `resume D` continues a run from its checkpoint. Exit status: 0 the
matrix passed (or the settings are valid), 1 a step failed (the evidence is still written), 2 bad
input (one line naming the field: a settings rule, a missing `--consent`, a changed identity).
The library is imported when a command runs, so `gco --help` stays quick.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from gco.cli.common import CheckedPath, connection_options, emit, open_store
from gco.local.stack import EVIDENCE_BUCKET_ENV
from gco.validation.errors import MatrixFailedError, SettingsError


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
@connection_options
def run(
    settings_path: Path,
    consent: bool,
    run_dir: Path | None,
    evidence_bucket: str | None,
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
    result = start(settings_path, store, run_dir=run_dir, evidence_bucket=evidence_bucket)
    _finish(result_json(result), result.verdict, result.summary, output)


@matrix.command()
@click.argument("run_dir", metavar="RUN_DIR", type=CheckedPath(path_type=Path, file_okay=False))
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
@connection_options
def resume(
    run_dir: Path,
    settings_path: Path | None,
    evidence_bucket: str | None,
    endpoint_url: str | None,
    table_name: str | None,
    output: str,
) -> None:
    """Continue the run in RUN_DIR from its checkpoint (refused if its settings changed).

    \b
    Example:
      gco matrix resume runs/matrix-1 --settings matrix.yaml
    """
    from gco.validation.service import result_json
    from gco.validation.service import resume as resume_run

    store = open_store(endpoint_url, table_name)
    result = resume_run(run_dir, store, settings_path=settings_path, evidence_bucket=evidence_bucket)
    _finish(result_json(result), result.verdict, result.summary, output)
