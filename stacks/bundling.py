"""Lambda code bundled without Docker: the handlers, `gco/`, and Lambda-compatible wheels.

`LocalPythonBundling` implements CDK's ILocalBundling: it copies `lambdas/` and the `gco` package
into the asset directory and, when asked, installs the runtime requirements as manylinux wheels for
the Lambda's Python and architecture (`pip --platform ... --only-binary=:all:`). The Docker image
CDK would otherwise use is never pulled: `try_bundle` always succeeds or raises.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

ROOT = Path(__file__).resolve().parent.parent
LAMBDA_PYTHON = "3.12"
# What the handlers import beyond the Lambda runtime's boto3; pinned to the project's ranges.
LAMBDA_REQUIREMENTS = ("aws-lambda-powertools>=3.0,<4", "pydantic>=2.7,<3", "httpx>=0.27,<1")
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "local", "bench", "cli", "validation")


@jsii.implements(ILocalBundling)
class LocalPythonBundling:
    """Copy the code and (optionally) install wheels into the asset output directory."""

    def __init__(self, *, install_dependencies: bool) -> None:
        self.install_dependencies = install_dependencies

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        out = Path(output_dir)
        shutil.copytree(ROOT / "gco", out / "gco", ignore=_IGNORE, dirs_exist_ok=True)
        for handler in (ROOT / "lambdas").glob("*.py"):
            shutil.copy2(handler, out / handler.name)
        if self.install_dependencies:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--no-compile",
                    "--target",
                    str(out),
                    "--implementation",
                    "cp",
                    "--python-version",
                    LAMBDA_PYTHON,
                    "--platform",
                    "manylinux2014_x86_64",
                    "--only-binary=:all:",
                    *LAMBDA_REQUIREMENTS,
                ],
                check=True,
            )
        return True


def lambda_code(*, install_dependencies: bool) -> lambda_.Code:
    """The asset for every gco Lambda: hashed on the output, bundled locally."""
    return lambda_.Code.from_asset(
        str(ROOT / "lambdas"),
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            image=DockerImage.from_registry("public.ecr.aws/sam/build-python3.12"),
            local=LocalPythonBundling(install_dependencies=install_dependencies),
            command=["false"],
        ),
    )
