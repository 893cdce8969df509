"""Every docstring of the gco package that names code in backticks names code that exists.

What counts as naming code (the rest of what is in backticks, a state, a field, a command, is prose):

- `_name` or `_name(...)`: a private function, method, class, attribute or constant. It exists when
  gco defines that name somewhere, or when the module holds it in a string (a metric's `_total`
  suffix is text the module matches, not code);
- `Class.member`: a class the module defines or imports, and a member of it (a method, an attribute
  one of its methods sets, a pydantic field); a class gco defines elsewhere is looked up by name,
  and one from outside gco that the module does not import is not checked;
- `gco.dotted.path`: a module of gco and what it defines, or a setting of the `gco` context of
  cdk.json (`gco.account`, `gco.proxy`: the fields of `gco.deployment.config.GcoConfig`);
- `module.name`, where the module imports `module` from gco: a name that module defines;
- `file.py`: a module of that name in the package, elsewhere in gco, or at the project's root (`app.py`).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gco
from gco.deployment.config import GcoConfig

ROOT = Path(gco.__file__).parent
# Files another branch of this round rewrites (the reconcile pass, its docstrings moving to docs/):
# the integrator drops this set after the merge, and the rule then holds there too.
TICKED = re.compile(r"`([^`\s]+)`")
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
PRIVATE = re.compile(rf"_{IDENT}")
MEMBER = re.compile(rf"([A-Z][A-Za-z0-9]*)\.({IDENT})")
DOTTED = re.compile(rf"[a-z_][a-z0-9_]*(\.{IDENT})+")
FILE = re.compile(r"[a-z_][a-z0-9_]*\.py")
Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


class Index:
    """What gco defines: every name, and each class's members (by class name)."""

    def __init__(self, trees: dict[Path, ast.Module]) -> None:
        self.names: set[str] = set()
        self.members: dict[str, set[str]] = {}
        self.files = {path.name for path in trees}
        for tree in trees.values():
            for node in ast.walk(tree):
                self._add(node)

    def _add(self, node: ast.AST) -> None:
        if isinstance(node, Definition):
            self.names.add(node.name)
        elif isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Store):
            self.names.add(node.id if isinstance(node, ast.Name) else node.attr)
        elif isinstance(node, ast.arg):
            self.names.add(node.arg)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            self.names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        if isinstance(node, ast.ClassDef):
            members = self.members.setdefault(node.name, set())
            for inner in ast.walk(node):
                if isinstance(inner, Definition):
                    members.add(inner.name)
                elif isinstance(inner, ast.AnnAssign) and isinstance(inner.target, ast.Name):
                    members.add(inner.target.id)
                elif isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                    members.add(inner.id)
                elif (
                    isinstance(inner, ast.Attribute)
                    and isinstance(inner.value, ast.Name)
                    and inner.value.id in ("self", "cls")
                ):
                    members.add(inner.attr)

    def has_member(self, cls: type, name: str) -> bool:
        return (
            hasattr(cls, name)
            or name in getattr(cls, "model_fields", {})
            or any(name in self.members.get(base.__name__, set()) for base in cls.__mro__)
        )


def docstrings(tree: ast.Module) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | Definition) and (text := ast.get_docstring(node)):
            yield text


def strings_of(tree: ast.Module) -> str:
    """Every string constant of the module, docstrings aside, joined."""
    found = {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    return "\n".join(found - set(docstrings(tree)))


def walk(value: Any, path: list[str], index: Index) -> bool:
    """Whether each of `path` is an attribute of the one before, from `value`."""
    for name in path:
        if inspect.isclass(value) and not hasattr(value, name):
            return index.has_member(value, name)  # an instance attribute: the path ends in data
        if not hasattr(value, name):
            return False
        value = getattr(value, name)
    return True


def a_setting(path: list[str]) -> bool:
    """Whether `path` (below `gco`) names a field of the deployment settings (the cdk.json context)."""
    model: Any = GcoConfig
    for name in path:
        fields = getattr(model, "model_fields", None)
        if not fields or name not in fields:
            return False
        model = fields[name].annotation
    return True


def dotted_exists(parts: list[str], index: Index) -> bool:
    for cut in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        return walk(module, parts[cut:], index) or (cut == 1 and a_setting(parts[1:]))
    return False


def missing(token: str, namespace: dict[str, Any], strings: str, package: Path, index: Index) -> bool:
    """Whether `token` (the text between backticks) names code that does not exist."""
    name = re.sub(r"\(.*\)$", "", token)
    if PRIVATE.fullmatch(name):
        return name not in index.names and name not in strings
    if FILE.fullmatch(name):
        return not (package / name).exists() and name not in index.files and not (ROOT.parent / name).exists()
    if member := MEMBER.fullmatch(name):
        cls_name, attribute = member.groups()
        cls = namespace.get(cls_name)
        if inspect.isclass(cls):
            return not index.has_member(cls, attribute)
        known = index.members.get(cls_name)
        return known is not None and attribute not in known
    if DOTTED.fullmatch(name):
        parts = name.split(".")
        if parts[0] == "gco":
            return not dotted_exists(parts, index)
        module = namespace.get(parts[0])
        if isinstance(module, types.ModuleType) and module.__name__.startswith("gco"):
            return not walk(module, parts[1:], index)
    return False


def trees() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(ROOT.rglob("*.py"))}


def dangling() -> list[str]:
    parsed = trees()
    index = Index(parsed)
    found = []
    for path, tree in parsed.items():
        where = str(path.relative_to(ROOT.parent))
        if path.stem == "__main__":  # `python -m` entry points run on import
            continue
        dotted = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")
        namespace = vars(importlib.import_module(dotted))
        strings = strings_of(tree)
        for text in docstrings(tree):
            found += [
                f"{where}: `{token}`"
                for token in TICKED.findall(text)
                if missing(token, namespace, strings, path.parent, index)
            ]
    return found


def test_every_docstring_that_names_code_names_code_that_exists() -> None:
    problems = dangling()
    assert not problems, "docstrings name code that does not exist:\n" + "\n".join(problems)


def test_the_rule_sees_a_name_that_does_not_exist(tmp_path: Path) -> None:
    source = '''
"""Module: `_helper`, `_gone`, `Thing.run`, `Thing.size`, `Thing.fly`, `json.dumps`, `json.nothing`."""
import json


class Thing:
    def __init__(self):
        self.size = 1

    def run(self):
        """Calls `_helper(1)`; `Outside.anything` is not gco's; `mod.py` and `absent.py`."""


def _helper(x):
    return x
'''
    tree = ast.parse(source)
    namespace: dict[str, Any] = {}
    exec(compile(tree, "<test>", "exec"), namespace)  # noqa: S102 - the source above, as a module
    index = Index({tmp_path / "mod.py": tree})
    tokens = [token for text in docstrings(tree) for token in TICKED.findall(text)]
    found = [token for token in tokens if missing(token, namespace, strings_of(tree), tmp_path, index)]
    # json is not gco's: `json.nothing` is prose to this rule, as any module outside gco is.
    assert found == ["_gone", "Thing.fly", "absent.py"]
