"""Each name once: an environment variable's name, a label or annotation key, the table's default
name. The defining constant is the only string literal in the project's code that holds it; every
other place imports the constant (docstrings and comments may name it in prose; tests may write it,
as an oracle independent of the code).

The names held: the module-level string constants of `gco/env.py`, and every module-level constant
of `gco` named `*_ENV`, `*_LABEL`, `*_ANNOTATION` or `MANAGED_BY`.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
CODE = ("gco", "stacks", "lambdas", "gpu_runner", "benchmarks", "app.py")
HELD = re.compile(r"[A-Z_]+_(ENV|LABEL|ANNOTATION)|MANAGED_BY|DEFAULT_TABLE")
# The same word meaning something else: the CLI's table column titled REGION, not the variable.
HOMONYMS = {("REGION", "gco/cli/views.py")}


def code_files() -> Iterator[Path]:
    for name in CODE:
        path = PROJECT / name
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def definitions(path: Path, tree: ast.Module) -> Iterator[tuple[str, str]]:
    """(value, where) of each held constant a module defines."""
    is_env = path == PROJECT / "gco" / "env.py"
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            value = node.value.value
            for target in node.targets:
                held = isinstance(target, ast.Name) and (is_env or HELD.fullmatch(target.id))
                if held and isinstance(value, str):
                    yield value, f"{path.relative_to(PROJECT)}:{node.lineno}"


def literals(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, text) of each string literal that is not a docstring."""
    skip = docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value


def test_each_name_is_written_once() -> None:
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in code_files()}
    defined: dict[str, list[str]] = defaultdict(list)
    for path, tree in trees.items():
        if path.is_relative_to(PROJECT / "gco"):
            for value, where in definitions(path, tree):
                defined[value].append(where)
    assert len(defined) > 40  # env.py and the labels: the scan found them
    twice = {value: places for value, places in defined.items() if len(places) > 1}
    assert not twice, f"defined more than once: {twice}"
    patterns = {value: re.compile(rf"(?<![\w./-]){re.escape(value)}(?![\w/-])") for value in defined}
    written: dict[str, list[str]] = defaultdict(list)
    for path, tree in trees.items():
        for line, text in literals(tree):
            for value, pattern in patterns.items():
                if pattern.search(text) and (value, str(path.relative_to(PROJECT))) not in HOMONYMS:
                    written[value].append(f"{path.relative_to(PROJECT)}:{line}")
    again = {value: places for value, places in written.items() if len(places) > 1}
    assert not again, "\n".join(f"{value!r} written at {places}" for value, places in again.items())
