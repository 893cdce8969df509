"""The layout of `gco/` (docs/layout.md, "Layers" and "Wings"): a few leaves at the root, everything
else in the wing it serves, and test folders that mirror the wings."""

from __future__ import annotations

from pathlib import Path

import gco

GCO = Path(gco.__file__).parent
TESTS = Path(__file__).resolve().parents[1]
ROOT_MODULES_AT_MOST = 6
# The test folders that stand for a deployment unit beside the library rather than a wing of gco.
UNITS = {"lambdas", "gpu_runner", "stacks"}


def root_modules() -> list[str]:
    return sorted(path.stem for path in GCO.glob("*.py") if path.name != "__init__.py")


def wings() -> set[str]:
    return {path.name for path in GCO.iterdir() if (path / "__init__.py").is_file()}


def test_gco_root_holds_a_few_leaves_only() -> None:
    found = root_modules()
    assert len(found) <= ROOT_MODULES_AT_MOST, f"{len(found)} modules at gco/ root: {found}"


def test_each_test_folder_names_a_wing_or_a_deployment_unit() -> None:
    for kind in ("unit", "functional"):
        folders = {
            path.name
            for path in (TESTS / kind).iterdir()
            if path.is_dir() and not path.name.startswith(("_", "."))
        }
        assert folders <= wings() | UNITS, f"tests/{kind}/: {sorted(folders - wings() - UNITS)}"


def test_no_test_at_a_folders_root_is_named_for_a_module_inside_a_wing() -> None:
    at_root = set(root_modules())
    in_wings = {path.stem for path in GCO.glob("*/**/*.py") if path.name != "__init__.py"}
    for kind in ("unit", "functional"):
        for test in (TESTS / kind).glob("test_*.py"):
            module = test.stem.removeprefix("test_")
            assert module in at_root or module not in in_wings, (
                f"tests/{kind}/{test.name} tests gco's {module}, which lives in a wing: move it to its folder"
            )
