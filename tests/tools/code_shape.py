"""The shape of the code, measured with `ast`: files per package, the largest files, function lengths
(median, p90, max) and public docstrings.

    .venv/bin/python -m tests.tools.code_shape [--json]

A function's length is its lines from `def` to its last line (decorators and docstring included);
nested functions are counted on their own as well. Public means no leading underscore in the name
of the module, class or function (a method of a private class is private).
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
ROOTS = ("gco", "stacks", "lambdas", "gpu_runner")


@dataclass
class Shape:
    """What one pass over the sources found."""

    files_per_package: dict[str, int] = field(default_factory=dict)
    file_lines: dict[str, int] = field(default_factory=dict)
    function_lengths: list[int] = field(default_factory=list)
    longest: list[tuple[int, str]] = field(default_factory=list)
    public: int = 0
    documented: int = 0


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _public_nodes(tree: ast.Module) -> Iterator[ast.AST]:
    """The module, and its public classes and functions (methods of public classes included)."""
    yield tree
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name.startswith("_"):  # private, or a dunder method (its protocol documents it)
                continue
            yield node
            if isinstance(node, ast.ClassDef):
                pending.extend(node.body)


def measure(files: Sequence[Path], base: Path) -> Shape:
    """The shape of `files`, named relative to `base`."""
    shape = Shape()
    for path in files:
        relative = path.relative_to(base)
        package = ".".join(relative.parent.parts) or "."
        shape.files_per_package[package] = shape.files_per_package.get(package, 0) + 1
        text = path.read_text(encoding="utf-8")
        shape.file_lines[str(relative)] = len(text.splitlines())
        tree = ast.parse(text)
        for function in _functions(tree):
            length = (function.end_lineno or function.lineno) - function.lineno + 1
            shape.function_lengths.append(length)
            shape.longest.append((length, f"{relative}:{function.lineno} {function.name}"))
        if path.name.startswith("_") and path.name != "__init__.py":
            continue
        for node in _public_nodes(tree):
            shape.public += 1
            shape.documented += ast.get_docstring(node) is not None  # type: ignore[arg-type]
    shape.longest.sort(reverse=True)
    return shape


def percentile(values: Sequence[int], fraction: float) -> int:
    """The nearest-rank percentile (`fraction` of 1)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summary(shape: Shape) -> dict[str, object]:
    """The figures as one JSON-ready mapping."""
    lengths = shape.function_lengths
    largest = sorted(shape.file_lines.items(), key=lambda item: -item[1])[:5]
    return {
        "files_per_package": dict(sorted(shape.files_per_package.items())),
        "largest_files": dict(largest),
        "functions": len(lengths),
        "function_lines": {
            "median": statistics.median(lengths) if lengths else 0,
            "p90": percentile(lengths, 0.9) if lengths else 0,
            "max": max(lengths, default=0),
        },
        "longest_functions": [f"{where} ({length} lines)" for length, where in shape.longest[:5]],
        "public_docstrings": f"{shape.documented} of {shape.public}",
    }


def sources(roots: Sequence[str] = ROOTS) -> list[Path]:
    """The project's Python files under `roots`."""
    return sorted(path for root in roots for path in (PROJECT / root).rglob("*.py"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    parser.add_argument("roots", nargs="*", default=list(ROOTS), help="folders to measure")
    args = parser.parse_args(argv)
    figures = summary(measure(sources(args.roots), PROJECT))
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    for key, value in figures.items():
        if isinstance(value, dict):
            print(f"{key}:")
            for name, number in value.items():
                print(f"  {name}: {number}")
        elif isinstance(value, list):
            print(f"{key}:")
            for line in value:
                print(f"  {line}")
        else:
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
