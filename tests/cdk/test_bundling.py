"""Lambda code bundled locally (no Docker): handlers and the gco modules they import, nothing else."""

from __future__ import annotations

from pathlib import Path

from stacks.bundling import LAMBDA_REQUIREMENTS, LocalPythonBundling
from tests.cdk.conftest import Synthesized


def test_local_bundling_copies_handlers_and_library(tmp_path: Path) -> None:
    assert LocalPythonBundling(install_dependencies=False).try_bundle(str(tmp_path), image=None)  # type: ignore[arg-type]
    assert (tmp_path / "reconciler.py").is_file() and (tmp_path / "sweep.py").is_file()
    assert (tmp_path / "gco" / "reconcile" / "reconciler.py").is_file()
    assert (tmp_path / "gco" / "endpoints" / "store.py").is_file()
    for absent in ("local", "bench", "cli", "validation"):
        assert not (tmp_path / "gco" / absent).exists()
    assert not list(tmp_path.rglob("__pycache__"))


def test_requirements_are_what_the_handlers_import() -> None:
    names = {requirement.split(">")[0].split("=")[0] for requirement in LAMBDA_REQUIREMENTS}
    assert names == {"aws-lambda-powertools", "pydantic", "httpx"}


def test_both_functions_of_a_region_share_one_bundled_asset(synthesized: Synthesized) -> None:
    template = synthesized.template_json("gco-regional-us-west-2")
    keys = {
        r["Properties"]["Code"]["S3Key"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and "S3Key" in r["Properties"].get("Code", {})
    }
    assert len(keys) == 1
