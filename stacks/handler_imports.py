"""Which modules of `gco/` the Lambda handlers import: the bundle holds these and nothing else.

Read from the source (no import runs): every `import` and `from ... import` of a `gco` module in
the handlers, then in each module they reach, at any depth of the code (an import inside a
function runs later, on the first invocation that needs it, and must be in the bundle then),
except under `if TYPE_CHECKING:` (never run). A module brings the `__init__.py` of every package
above it (Python imports those first). The local stack, the stand-in API server, the CLI and the
benchmark code are then left out because no handler reaches them, not because a list names them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

PACKAGE = "gco"


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, package: str) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(module, names imported from it) for every import that runs, relative ones resolved."""
    nodes: list[ast.AST] = [tree]
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            nodes.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from ((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            yield base, tuple(alias.name for alias in node.names)
        nodes.extend(ast.iter_child_nodes(node))


def _source(root: Path, module: str) -> Path | None:
    """The file of `module` under `root` (a module file or a package's `__init__.py`), if any."""
    path = root.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _with_packages(module: str) -> list[str]:
    """`a.b.c` -> `a`, `a.b`, `a.b.c` (Python imports each package above a module first)."""
    parts = module.split(".")
    return [".".join(parts[: index + 1]) for index in range(len(parts))]


def handler_modules(root: Path, handlers: Iterable[Path]) -> set[Path]:
    """Every `gco` source file (relative to `root`) the `handlers` import, directly or transitively."""
    found: set[str] = set()
    queue: list[tuple[Path, str]] = [(handler, "") for handler in handlers]
    while queue:
        path, package = queue.pop()
        for module, names in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path)), package):
            if module.split(".")[0] != PACKAGE:
                continue
            # `from gco.x import y` imports the submodule gco.x.y when there is one.
            candidates = [module, *(f"{module}.{name}" for name in names if name != "*")]
            for name in (step for candidate in candidates for step in _with_packages(candidate)):
                source = _source(root, name)
                if name in found or source is None:
                    continue
                found.add(name)
                queue.append((source, name if source.name == "__init__.py" else name.rpartition(".")[0]))
    sources = {_source(root, name) for name in found}
    return {source.relative_to(root) for source in sources if source is not None}
