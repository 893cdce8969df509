"""A cloud assembly's stacks and file assets, read from its `manifest.json`.

The assembly is the cloud assembly schema's output of `cdk synth` (aws-cdk-lib's `cx-api`; the
`cloud-assembly-schema` package): `manifest.json` lists artifacts, each stack an
`aws:cloudformation:stack` with its `templateFile` and environment (`aws://account/region`), each
stack's assets a `cdk:asset-manifest` file whose `files` map an asset's hash to its source path in
the assembly. A template names a Lambda function's code by the S3 object key its asset is published
under (`<hash>.zip`), so the hash leads back to the folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from gco.local.errors import AssemblyError

MANIFEST = "manifest.json"
STACK_TYPE = "aws:cloudformation:stack"
ASSETS_TYPE = "cdk:asset-manifest"


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise AssemblyError(f"cannot read {path}: {error}") from error


@dataclass(frozen=True)
class AssetManifest:
    """One stack's file assets: hash -> the folder or file in the assembly."""

    directory: Path
    files: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def read(cls, directory: Path, name: str) -> AssetManifest:
        """The asset manifest file `name` of the assembly in `directory`.

        Raises:
            AssemblyError: the file cannot be read as JSON.
        """
        document = _load(directory / name)
        files = {key: directory / value["source"]["path"] for key, value in document.get("files", {}).items()}
        return cls(directory, files)

    def path_of_key(self, object_key: str) -> Path:
        """The asset published under `object_key` (`<hash>.zip` or `<hash>.json`).

        Raises:
            AssemblyError: no asset of that hash, or its folder is missing.
        """
        digest = object_key.split(".", 1)[0]
        path = self.files.get(digest)
        if path is None or not path.exists():
            raise AssemblyError(f"no asset {digest} in {self.directory} (object key {object_key})")
        return path


@dataclass(frozen=True)
class StackArtifact:
    """A stack of the assembly: its name, Region, template and assets."""

    name: str
    region: str
    template: dict[str, Any]
    assets: AssetManifest

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        """The template's resources of one type (`AWS::Lambda::Function`), by logical id."""
        found = self.template.get("Resources", {})
        return {key: value for key, value in found.items() if value.get("Type") == kind}


@dataclass(frozen=True)
class CloudAssembly:
    """A synthesized app: `cdk.out`, or the directory an App(outdir=...) synthesized into."""

    directory: Path

    @classmethod
    def open(cls, directory: Path) -> CloudAssembly:
        """The assembly in `directory`.

        Raises:
            AssemblyError: the directory holds no manifest.
        """
        if not (directory / MANIFEST).is_file():
            raise AssemblyError(f"{directory} is not a cloud assembly (no {MANIFEST}): run `cdk synth`")
        return cls(directory)

    @cached_property
    def stacks(self) -> dict[str, StackArtifact]:
        """Every stack of the assembly, by name (its `displayName`, else its artifact id).

        Raises:
            AssemblyError: the manifest, a template or an asset manifest cannot be read.
        """
        artifacts: dict[str, Any] = _load(self.directory / MANIFEST).get("artifacts", {})
        found: dict[str, StackArtifact] = {}
        for artifact_id, artifact in artifacts.items():
            if artifact.get("type") != STACK_TYPE:
                continue
            properties = artifact.get("properties", {})
            assets_id = next((d for d in artifact.get("dependencies", []) if d.endswith(".assets")), None)
            assets = AssetManifest(self.directory)
            if assets_id is not None and artifacts.get(assets_id, {}).get("type") == ASSETS_TYPE:
                assets = AssetManifest.read(self.directory, artifacts[assets_id]["properties"]["file"])
            region = str(artifact.get("environment", "aws://unknown-account/unknown-region")).rsplit("/", 1)[
                1
            ]
            template = _load(self.directory / properties["templateFile"])
            name = str(artifact.get("displayName") or artifact_id)
            found[name] = StackArtifact(name, region, template, assets)
        return found

    def stack(self, name: str) -> StackArtifact:
        """One stack by name.

        Raises:
            AssemblyError: the assembly has no such stack.
        """
        try:
            return self.stacks[name]
        except KeyError:
            raise AssemblyError(
                f"no stack {name!r} in {self.directory} (has {sorted(self.stacks)})"
            ) from None
