"""cfn-lint over every synthesized template: zero errors (warnings are reported, not failed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cdk.conftest import Synthesized


def lint(template: dict[str, Any], directory: Path, name: str) -> list[dict[str, Any]]:
    """cfn-lint's findings (its JSON output) for one template, run as the command itself."""
    path = directory / f"{name}.json"
    path.write_text(json.dumps(template))
    result = subprocess.run(
        [str(Path(sys.executable).with_name("cfn-lint")), "--format", "json", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode in (0, 2, 4, 6, 8, 10, 12, 14), result.stderr  # bit 1 would be a crash
    findings: list[dict[str, Any]] = json.loads(result.stdout or "[]")
    return findings


def test_cfn_lint_catches_an_invalid_template(tmp_path: Path) -> None:
    broken = {"Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {"NoSuchProperty": 1}}}}
    levels = [finding["Level"] for finding in lint(broken, tmp_path, "broken")]
    assert "Error" in levels


@pytest.mark.parametrize(
    "stack",
    ["gco-keys-us-west-2", "gco-global", "gco-regional-us-east-1", "gco-regional-us-west-2", "gco-runner"],
)
def test_every_template_passes_cfn_lint(synthesized: Synthesized, stack: str, tmp_path: Path) -> None:
    errors = [
        (finding["Rule"]["Id"], finding["Message"])
        for finding in lint(synthesized.template_json(stack), tmp_path, stack)
        if finding["Level"] == "Error"
    ]
    assert errors == []
