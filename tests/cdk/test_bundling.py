"""Lambda code bundled locally (no Docker): handlers and the gco modules they import, nothing else.

The wheels are chosen for the functions' runtime and architecture; test_bundling_install.py installs them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import aws_lambda as lambda_

from stacks.bundling import (
    ARCHITECTURE,
    LAMBDA_REQUIREMENTS,
    LOCK,
    RUNTIME,
    LocalPythonBundling,
    manylinux_platforms,
    pip_install_command,
    python_version,
)
from tests.cdk.conftest import HOME, OTHER, Synthesized


def test_local_bundling_copies_handlers_and_library(tmp_path: Path) -> None:
    assert LocalPythonBundling(install_dependencies=False).try_bundle(str(tmp_path), image=None)  # type: ignore[arg-type]
    assert (tmp_path / "reconciler.py").is_file() and (tmp_path / "sweep.py").is_file()
    assert (tmp_path / "gco" / "reconcile" / "reconciler.py").is_file()
    assert (tmp_path / "gco" / "endpoints" / "store.py").is_file()
    for absent in ("local", "bench", "cli", "validation", "evidence"):
        assert not (tmp_path / "gco" / absent).exists()
    assert not list(tmp_path.rglob("__pycache__"))


def test_requirements_are_what_the_handlers_import() -> None:
    names = {requirement.split(">")[0].split("=")[0] for requirement in LAMBDA_REQUIREMENTS}
    assert names == {"aws-lambda-powertools", "pydantic", "httpx"}


def test_wheels_are_asked_for_the_functions_python_and_architecture(tmp_path: Path) -> None:
    command = pip_install_command(tmp_path, RUNTIME, ARCHITECTURE)
    assert command[command.index("--python-version") + 1] == "3.14"
    platforms = {command[i + 1] for i, arg in enumerate(command) if arg == "--platform"}
    assert {"manylinux2014_x86_64", "manylinux_2_28_x86_64", "manylinux_2_34_x86_64"} <= platforms
    assert "manylinux_2_35_x86_64" not in platforms
    # Exactly the locked wheels: no resolution on the build machine, every file's hash checked.
    assert command[-4:] == ["--no-deps", "--require-hashes", "-r", str(LOCK)]


def test_platforms_follow_the_architecture_and_the_runtime_glibc() -> None:
    arm = manylinux_platforms(lambda_.Runtime.PYTHON_3_13, lambda_.Architecture.ARM_64)
    assert all(tag.endswith("_aarch64") for tag in arm) and arm[0] == "manylinux_2_34_aarch64"
    amazon_linux_2 = manylinux_platforms(lambda_.Runtime.PYTHON_3_11, lambda_.Architecture.X86_64)
    assert amazon_linux_2[0] == "manylinux_2_26_x86_64" and amazon_linux_2[-1] == "manylinux2014_x86_64"


def test_only_python_runtimes_have_a_python_version() -> None:
    assert python_version(lambda_.Runtime.PYTHON_3_12) == "3.12"
    with pytest.raises(ValueError, match="nodejs"):
        python_version(lambda_.Runtime.NODEJS_22_X)


def bundled_functions(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The properties of every gco function (named; CDK's kubectl provider functions are not) whose
    code is the bundled asset (inline ones are not)."""
    return [
        resource["Properties"]
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
        and "S3Key" in resource["Properties"].get("Code", {})
        and "FunctionName" in resource["Properties"]
    ]


def test_both_functions_of_a_region_share_one_bundled_asset(synthesized: Synthesized) -> None:
    functions = bundled_functions(synthesized.template_json(f"gco-regional-{OTHER}"))
    assert len({function["Code"]["S3Key"] for function in functions}) == 1


@pytest.mark.parametrize("region", [HOME, OTHER])
def test_bundled_functions_run_the_runtime_the_wheels_are_for(synthesized: Synthesized, region: str) -> None:
    functions = bundled_functions(synthesized.template_json(f"gco-regional-{region}"))
    assert len(functions) == 2
    for function in functions:
        assert function["Runtime"] == RUNTIME.name
        # CloudFormation's default, when a function names none, is x86_64.
        assert function.get("Architectures", ["x86_64"]) == [ARCHITECTURE.name]
