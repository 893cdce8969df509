"""`gco doctor`: parse the options and cdk.json, run the checks, print one line (or JSON) per check.

Exit status 0 when every check holds (warnings allowed), 1 when one fails, 2 for a bad option or a
bad cdk.json (one line naming the key).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from gco.deployment.config import REGION, ConfigError, GcoConfig, parse_config
from gco.deployment.kubernetes import today_utc
from gco.doctor.boto_reader import BotoAccountReader
from gco.doctor.errors import ChecksFailedError
from gco.doctor.local import subprocess_runner
from gco.doctor.service import run_doctor
from gco.errors import GcoInputError


def load_config(path: Path) -> GcoConfig:
    """The `gco` context of a cdk.json file.

    Raises:
        GcoInputError: the file is missing or not JSON, or the config is invalid.
    """
    try:
        context = json.loads(path.read_text(encoding="utf-8")).get("context", {})
    except (OSError, ValueError, AttributeError) as error:
        raise GcoInputError("--cdk-json", f"cannot read {path}: {error}") from None
    try:
        return parse_config(context.get("gco"))
    except ConfigError as error:
        raise GcoInputError("", f"{path}: {error}") from None


@click.command("doctor")
@click.option(
    "--region", "regions", multiple=True, help="A Region to check (repeatable) [default: cdk.json's]."
)
@click.option("--offline", is_flag=True, help="Only the checks that need no AWS credentials.")
@click.option(
    "--cdk-json",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("cdk.json"),
    show_default=True,
    help="The cdk.json whose gco context describes the deployment.",
)
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True)
def doctor(regions: tuple[str, ...], offline: bool, cdk_json: Path, output: str) -> None:
    """Check what a deploy needs: local tools, CDK bootstrap, quotas, Kubernetes support, roles.

    \b
    Example:
      gco doctor --region us-east-1 --region us-west-2
    """
    for region in regions:
        if not REGION.match(region):
            raise GcoInputError("--region", f"{region!r} is not a Region name")
    config = load_config(cdk_json)
    report = run_doctor(
        config,
        regions=list(regions) or config.regions,
        reader=None if offline else BotoAccountReader(),
        run=subprocess_runner,
        root=cdk_json.resolve().parent,
        today=today_utc(),
    )
    if output == "json":
        click.echo(json.dumps({"ok": report.ok, "checks": [c.model_dump() for c in report.checks]}, indent=2))
    else:
        for line in report.lines():
            click.echo(line)
    failed = [f"{c.scope} {c.name}" for c in report.checks if c.status == "fail"]
    if failed:
        raise ChecksFailedError(f"{len(failed)} check(s) failed: {', '.join(failed)}")
