"""Every error in its package's tree, and `Raises:` on every public function that raises.

The rules (docs/layout.md, "Errors"):

1. An exception class of gco is an `Error` below its package's root: the one class of the nearest
   `errors` module (the package's own, else its parent's, else `gco/errors.py`) that derives from
   none of that module's others. The tree drawn in that module's docstring names it.
2. A public function or method (no leading underscore, at module level or in a public class) whose
   own body raises an exception class by name lists that name under `Raises:` in its docstring.
   Not held to it: pydantic validators (pydantic turns what they raise into its ValidationError,
   converted where the model is parsed), click commands (their docstring is the `--help` text; the
   CLI maps errors to exit statuses) and `__dunder__` methods.

Private classes (a leading underscore) are a module's own control flow and are not held to rule 1;
nor are the two signals in `SIGNALS`.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import gco
from gco.errors import GcoError

ROOT = Path(gco.__file__).parent
SIGNALS = {
    # Raised inside pydantic validators, which convert only ValueError and AssertionError; the model's
    # parser turns the resulting ValidationError into InvalidSpecError naming the field.
    "gco.endpoints.spec.FieldValueError",
    # A failed DynamoDB condition inside the store, caught there and answered as None/False.
    "gco.endpoints.dynamo.ConditionLost",
}
# Held to the rules once their modules are reworked; an entry that keeps its rule must leave the list.
AWAITING: set[str] = set()
VALIDATORS = {"field_validator", "model_validator"}
CLICK = {"command", "group", "option", "argument", "pass_context", "pass_obj"}


def modules() -> Iterator[ModuleType]:
    yield gco
    for found in pkgutil.walk_packages(gco.__path__, "gco."):
        if not found.name.endswith("__main__"):  # `python -m` entry points run on import
            yield importlib.import_module(found.name)


def tree_module(module: ModuleType) -> ModuleType:
    """The `errors` module nearest to `module`: its package's, else an ancestor's, else gco.errors."""
    parts = module.__name__.split(".")
    package = parts if hasattr(module, "__path__") else parts[:-1]
    while len(package) > 1:
        candidate = ".".join([*package, "errors"])
        if (ROOT.parent / candidate.replace(".", "/")).with_suffix(".py").exists():
            return importlib.import_module(candidate)
        package = package[:-1]
    return importlib.import_module("gco.errors")


def root_of(errors: ModuleType) -> type[BaseException]:
    own = [
        value
        for value in vars(errors).values()
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == errors.__name__
    ]
    roots = [cls for cls in own if not any(other is not cls and issubclass(cls, other) for other in own)]
    assert len(roots) == 1, f"{errors.__name__} has {len(roots)} roots: {roots}"
    return roots[0]


def exception_classes() -> Iterator[tuple[str, type[BaseException], ModuleType]]:
    for module in modules():
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                yield f"{module.__name__}.{name}", value, module


def tree_problem(qualified: str, cls: type[BaseException], module: ModuleType) -> str | None:
    errors = tree_module(module)
    root = root_of(errors)
    if not cls.__name__.endswith("Error"):
        return f"{qualified}: an exception's name ends in Error"
    if not issubclass(cls, root) or not issubclass(cls, GcoError):
        return f"{qualified} derives from {[b.__name__ for b in cls.__mro__[1:-2]]}, not {root.__name__}"
    if not re.search(rf"\b{cls.__name__}\b", errors.__doc__ or ""):
        return f"{qualified} is not drawn in the tree of {errors.__name__}'s docstring"
    return None


def test_every_exception_is_in_its_packages_tree() -> None:
    problems, awaited = [], set()
    for qualified, cls, module in exception_classes():
        if cls.__name__.startswith("_") or qualified in SIGNALS:
            continue
        problem = tree_problem(qualified, cls, module)
        if qualified in AWAITING:
            awaited.add(qualified) if problem else problems.append(f"{qualified} keeps the rule now")
        elif problem:
            problems.append(problem)
    assert not problems, "\n".join(problems)
    assert awaited == {entry for entry in AWAITING if ":" not in entry}


def _decorator_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = set()
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        names.add(target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
    return names


def raised_classes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The exception classes `function`'s own body raises by name (nested functions are their own)."""
    found: set[str] = set()
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = raised.attr if isinstance(raised, ast.Attribute) else getattr(raised, "id", "")
            if name[:1].isupper():  # a class, not a helper that builds the exception
                found.add(name)
        pending.extend(ast.iter_child_nodes(node))
    return found


def public_functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    def walk(
        body: list[ast.stmt], owner: str
    ) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for node in body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                yield from walk(node.body, f"{owner}{node.name}.")
            elif (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and not node.name.startswith("_")
                and not _decorator_names(node) & (VALIDATORS | CLICK)
            ):
                yield f"{owner}{node.name}", node

    yield from walk(tree.body, "")


def undocumented_raises() -> dict[str, set[str]]:
    missing: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        for name, function in public_functions(ast.parse(path.read_text(encoding="utf-8"))):
            raised = raised_classes(function)
            doc = ast.get_docstring(function) or ""
            section = doc.partition("Raises:")[2]
            lacking = {cls for cls in raised if not re.search(rf"\b{cls}\b", section)}
            if lacking:
                missing[f"{path.relative_to(ROOT.parent)}:{name}"] = lacking
    return missing


def test_every_public_function_that_raises_says_so() -> None:
    missing = undocumented_raises()
    problems = [
        f"{where} raises {sorted(names)} without saying so under Raises:" for where, names in missing.items()
    ]
    problems = [p for p in problems if p.split(" ")[0] not in AWAITING]
    problems += [f"{entry} keeps the rule now" for entry in AWAITING if ":" in entry and entry not in missing]
    assert not problems, "\n".join(problems)


def test_the_raises_rule_sees_a_raise_and_its_documentation() -> None:
    source = '''
def loud(x):
    """Summary."""
    raise ValueError(x)

def documented(x):
    """Summary.

    Raises:
        errors.InputError: always.
    """
    raise errors.InputError(x)

def quiet(x):
    def inner():
        raise KeyError(x)
    try:
        return inner()
    except KeyError:
        raise

def _private(x):
    raise ValueError(x)
'''
    tree = ast.parse(source)
    found = {name: raised_classes(function) for name, function in public_functions(tree)}
    assert found == {"loud": {"ValueError"}, "documented": {"InputError"}, "quiet": set()}
