"""Every Python file of the project is type-checked (mypy strict) and format-checked (ruff).

`make types` runs plain `mypy`, which checks the `files` of pyproject's [tool.mypy]; `make lint` runs
ruff on the paths its recipe names. A new top-level folder of Python (or a script at the root) that
neither lists would go unchecked without anyone noticing: these tests fail instead.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# What an override may set: where a third party ships no types. Anything else would relax strictness.
OVERRIDE_KEYS = {"module", "ignore_missing_imports"}


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
