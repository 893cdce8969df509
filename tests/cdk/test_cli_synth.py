"""`npx cdk synth` with the CLI pinned in package.json: offline, no AWS credentials, every stack."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CDK = ROOT / "node_modules" / ".bin" / "cdk"
CREDENTIALS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
)


def test_cdk_cli_synthesizes_the_app_without_credentials(tmp_path: Path) -> None:
    if not CDK.exists():
        if os.environ.get("CI"):
            pytest.fail("node_modules/.bin/cdk is missing: `make test` installs it with npm ci")
        pytest.skip("the CDK CLI is not installed (make test installs it)")
    env = {key: value for key, value in os.environ.items() if key not in CREDENTIALS}
    env.update(
        AWS_EC2_METADATA_DISABLED="true",
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
        AWS_CONFIG_FILE=str(tmp_path / "none"),
    )
    out = tmp_path / "cdk.out"
    result = subprocess.run(
        [str(CDK), "synth", "--quiet", "--no-notices", "-o", str(out), "-c", "gco.bundle_dependencies=false"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    stacks = {
        name
        for name, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    }
    assert {"gco-global", "gco-runner"} <= stacks
    assert any(name.startswith("gco-regional-") for name in stacks)
    shutil.rmtree(out, ignore_errors=True)
