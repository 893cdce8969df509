"""The CDK CLI pinned in package.json reads the cloud assembly the locked aws-cdk-lib writes.

How the two relate: aws-cdk-lib writes `manifest.json` with the cloud assembly schema's `version`
(and, since schema 37 or so, `minimumCliVersion`); the CLI bundles the schema package, whose
`schema/version.json` holds the `revision` it reads, and refuses a manifest whose major version is
greater ("This CDK CLI is not compatible with the CDK library used by your application ... Maximum
schema version supported is 55.x.x, but found 56.0.0. You need at least CLI version ... to read this
manifest": `Manifest.validate` of @aws-cdk/cloud-assembly-schema, bundled in the CLI's lib/index.js).
Since aws-cdk-lib 2.179 the CLI is versioned on its own (2.1000.0 on), so the two pins must be
checked against each other rather than kept equal.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from packaging.version import Version

from tests.cdk.synth_cache import ROOT, Synthesized

CLI = ROOT / "node_modules" / "aws-cdk"
# The schema's version.json as the CLI's bundle holds it (esbuild keeps each JSON module's source path).
BUNDLED_SCHEMA = re.compile(
    r'"\.\./@aws-cdk/cloud-assembly-schema/schema/version\.json"\(exports2?, module2?\) \{\s*'
    r"module2?\.exports = \{(?P<body>.*?)\};",
    re.DOTALL,
)


def pinned_cli() -> str:
    manifest = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))
    return str(manifest["devDependencies"]["aws-cdk"])


def cli_schema_revision() -> int:
    """The major cloud assembly schema version the installed CLI reads up to."""
    if not CLI.exists():
        if os.environ.get("CI"):
            pytest.fail("node_modules/aws-cdk is missing: `make test` installs it with npm ci")
        pytest.skip("the CDK CLI is not installed (make test installs it)")
    bundle = (CLI / "lib" / "index.js").read_text(encoding="utf-8")
    found = BUNDLED_SCHEMA.search(bundle)
    assert found, "the CLI's bundle no longer holds the schema's version.json where this test looks"
    revision = re.search(r"revision:\s*(\d+)", found["body"])
    assert revision
    return int(revision.group(1))


def test_the_lock_file_and_the_installed_cli_are_the_pinned_version() -> None:
    lock = json.loads((ROOT / "package-lock.json").read_text(encoding="utf-8"))
    assert lock["packages"]["node_modules/aws-cdk"]["version"] == pinned_cli()
    if CLI.exists():
        installed = json.loads((CLI / "package.json").read_text(encoding="utf-8"))["version"]
        assert installed == pinned_cli(), "node_modules is stale: npm ci"


def test_the_pinned_cli_reads_the_library_s_cloud_assembly(synthesized: Synthesized) -> None:
    manifest = json.loads((Path(synthesized.assembly.directory) / "manifest.json").read_text())
    written = Version(manifest["version"])
    supported = cli_schema_revision()
    assert written.major <= supported, (
        f"aws-cdk-lib writes cloud assembly schema {written}; the CLI {pinned_cli()} reads up to "
        f"{supported}.x.x: raise aws-cdk in package.json"
    )
    minimum = manifest.get("minimumCliVersion")
    if minimum:
        assert Version(pinned_cli()) >= Version(minimum), (
            f"aws-cdk-lib asks for CLI {minimum} or newer; package.json pins {pinned_cli()}"
        )
