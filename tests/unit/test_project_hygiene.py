"""Every Python file of the project is type-checked (mypy strict) and format-checked (ruff).

`make types` runs plain `mypy`, which checks the `files` of pyproject's [tool.mypy]; `make lint` runs
ruff on the paths its recipe names. A new top-level folder of Python (or a script at the root) that
neither lists would go unchecked without anyone noticing: these tests fail instead.
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# What an override may set: where a third party ships no types, or which third parties mypy need not
# follow. Anything else would relax strictness.
OVERRIDE_KEYS = {"module", "ignore_missing_imports", "follow_imports"}
# The packages whose modules are followed only where the project imports them (pyproject's [tool.mypy]).
FOLLOWED_WHERE_IMPORTED = "aws_cdk"


def tracked_python_roots() -> set[str]:
    """The top-level entries holding git-tracked Python: folders, and the scripts at the root."""
    listed = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert listed, "git lists no Python file: not a checkout of the project?"
    return {path.split("/", 1)[0] for path in listed}


def uncovered(roots: set[str], checked: list[str]) -> list[str]:
    """The roots that no checked path holds (a checked path is a top-level folder or file)."""
    covered = {path.rstrip("/").split("/", 1)[0] for path in checked}
    return sorted(roots - covered)


def mypy_config() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as source:
        config: dict[str, Any] = tomllib.load(source)["tool"]["mypy"]
    return config


def lint_commands() -> dict[str, list[str]]:
    """The `make lint` recipe's ruff commands, by subcommand, with the paths each is given."""
    recipe = re.search(r"^lint:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M)
    assert recipe is not None, "the Makefile has no lint target"
    commands: dict[str, list[str]] = {}
    for line in recipe.group(1).splitlines():
        words = shlex.split(line.strip())
        if words and words[0].endswith("/ruff"):
            subcommand = " ".join(word for word in words[1:] if word in ("check", "format", "--check"))
            commands[subcommand] = [
                word for word in words[1:] if not word.startswith("-") and word not in ("check", "format")
            ]
    return commands


def test_mypy_checks_every_top_level_folder_of_python_strictly() -> None:
    config = mypy_config()
    assert config.get("strict") is True
    assert "packages" not in config and "modules" not in config, "plain `mypy` must check `files`"
    assert uncovered(tracked_python_roots(), config["files"]) == []


def test_mypy_overrides_only_name_untyped_third_parties() -> None:
    for override in mypy_config().get("overrides", []):
        assert set(override) <= OVERRIDE_KEYS, override
        modules = override["module"] if isinstance(override["module"], list) else [override["module"]]
        assert not any(module.split(".")[0] in tracked_python_roots() for module in modules), override


def imported_modules(package: str) -> set[str]:
    """Every module of `package` that the project's tracked Python imports (`from package import x`
    names the submodule `package.x` where x is lower case, as aws_cdk's service modules are)."""
    listed = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    found: set[str] = set()
    for path in listed:
        for node in ast.walk(ast.parse((ROOT / path).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.split(".")[0] == package)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == package:
                found.add(node.module or "")
                if node.module == package:
                    found.update(f"{package}.{a.name}" for a in node.names if a.name.islower())
    return found


def test_mypy_follows_every_aws_cdk_module_the_project_imports() -> None:
    overrides = mypy_config().get("overrides", [])
    skipped = [o for o in overrides if o.get("follow_imports") == "skip"]
    assert any(f"{FOLLOWED_WHERE_IMPORTED}.*" in o["module"] for o in skipped)
    followed = {m for o in overrides if o.get("follow_imports") == "normal" for m in o["module"]}
    imported = imported_modules(FOLLOWED_WHERE_IMPORTED)
    assert "aws_cdk.aws_eks_v2" in imported  # the walk finds what the stacks import
    assert sorted(imported - followed) == [], "add these to the follow_imports = normal override"
    assert all(o["follow_imports"] in ("skip", "normal") for o in overrides if "follow_imports" in o)


def test_ruff_lints_and_format_checks_every_top_level_folder_of_python() -> None:
    commands = lint_commands()
    assert set(commands) == {"check", "format --check"}
    roots = tracked_python_roots()
    assert uncovered(roots, commands["check"]) == []
    assert uncovered(roots, commands["format --check"]) == []


def test_the_check_names_a_folder_left_out() -> None:
    roots = {"gco", "tests", "app.py", "tools"}
    assert uncovered(roots, ["gco", "tests/", "app.py"]) == ["tools"]
    assert uncovered(roots, ["gco", "tests", "app.py", "tools"]) == []
