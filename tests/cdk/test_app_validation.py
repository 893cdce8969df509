"""CDK's built-in template validation: off in the App `cdk synth` runs unless asked for, on in the
tests' own synthesis (where it finds nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import Stack
from aws_cdk import aws_sqs as sqs

from stacks.app import VALIDATION_ENV, builtin_validation, new_app
from tests.cdk.conftest import Synthesized

# CDK writes this file into the cloud assembly when its validation plugins ran.
REPORT = "validation-report.json"


@pytest.mark.parametrize(
    ("value", "on"),
    [(None, False), ("false", False), ("", False), ("true", True), (" TRUE ", True), ("1", False)],
)
def test_the_built_in_validation_runs_only_when_asked_for(value: str | None, on: bool) -> None:
    assert builtin_validation({} if value is None else {VALIDATION_ENV: value}) is on


def test_the_app_cdk_synth_runs_writes_no_validation_report(tmp_path: Path) -> None:
    app = new_app({}, outdir=str(tmp_path))
    sqs.CfnQueue(Stack(app, "Tiny"), "Queue")
    app.synth()
    assert (tmp_path / "Tiny.template.json").exists()
    assert not (tmp_path / REPORT).exists()


def test_the_tests_synthesis_validates_every_template_and_finds_nothing(synthesized: Synthesized) -> None:
    report = json.loads((Path(synthesized.assembly.directory) / REPORT).read_text())
    [plugin] = report["pluginReports"]
    assert plugin["pluginName"] == "CloudFormation Validate"
    assert (plugin["conclusion"], plugin["violations"]) == ("success", [])
