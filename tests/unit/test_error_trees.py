"""Every error in its package's tree, and `Raises:` on every public function that raises.

The rules (docs/layout.md, "Errors"):

1. An exception class of gco is an `Error` below its package's root: the one class of the nearest
   `errors` module (the package's own, else its parent's, else `gco/errors.py`) that derives from
   none of that module's others. The tree drawn in that module's docstring names it.
2. A public function or method (no leading underscore, at module level or in a public class) that
   raises an exception class by name lists that name under `Raises:` in its docstring, or its
   class's docstring does (errors every method can raise, stated once). What it raises is what its
   own body raises and what the functions of its own module it calls raise, followed through
   (`_helper(...)`, `helper(...)`, `self._method(...)`, `cls._method(...)` of its own class), less
   what a `try` around the raise or the call catches (by name, by a base class the module
   imports, or `Exception`). Calls into other modules are their Raises' business, not followed.
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
SIGNAL_NAMES = {qualified.rpartition(".")[2] for qualified in SIGNALS}
# Files another branch of this round rewrites (the reconcile pass): held to the rule once merged. For
# the integrator: drop this set after the merge and name the errors its methods raise (for
# `KubeCluster`, ClusterAuthError and ClusterUnavailableError from `_request`, on the class).
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


Function = ast.FunctionDef | ast.AsyncFunctionDef


def _name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _caught(handlers: list[ast.ExceptHandler]) -> set[str]:
    names: set[str] = set()
    for handler in handlers:
        if handler.type is None:
            names.add("BaseException")
        else:
            types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            names.update(_name(kind) for kind in types)
    return names


class Raises:
    """What each function of one module raises, its calls into the module's own functions followed.

    `namespace` resolves a class name to the class (the module's globals) so that an `except` of a
    base class is seen to catch a subclass; without it, names are compared as written.
    """

    def __init__(self, tree: ast.Module, namespace: dict[str, object] | None = None) -> None:
        self.namespace = namespace or {}
        self.functions: dict[str, Function] = {}
        self.methods: dict[tuple[str, str], Function] = {}
        for node in tree.body:
            if isinstance(node, Function):
                self.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, Function):
                        self.methods[(node.name, item.name)] = item
        self._known: dict[tuple[str | None, str], set[str]] = {}

    def of(self, function: Function, owner: str | None = None) -> set[str]:
        """The classes `function` raises (nested functions and lambdas are their own)."""
        key = (owner, function.name)
        if key not in self._known:
            self._known[key] = set()  # a recursive call adds nothing new
            found: set[str] = set()
            for statement in function.body:
                self._walk(statement, frozenset(), owner, found)
            self._known[key] = found
        return self._known[key]

    def _walk(self, node: ast.AST, caught: frozenset[str], owner: str | None, found: set[str]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            return
        if isinstance(node, ast.Try | ast.TryStar):
            inner = caught | _caught(node.handlers)
            for statement in node.body:
                self._walk(statement, inner, owner, found)
            rest: list[ast.AST] = [*node.handlers, *node.orelse, *node.finalbody]
            for part in rest:
                self._walk(part, caught, owner, found)
            return
        if isinstance(node, ast.Raise) and node.exc is not None:
            name = _name(node.exc.func if isinstance(node.exc, ast.Call) else node.exc)
            if name[:1].isupper() and not self._catches(caught, name):  # a class, not a builder
                found.add(name)
        if isinstance(node, ast.Call):
            for target, target_owner in self._callee(node.func, owner):
                found.update(
                    name for name in self.of(target, target_owner) if not self._catches(caught, name)
                )
        for child in ast.iter_child_nodes(node):
            self._walk(child, caught, owner, found)

    def _callee(self, func: ast.expr, owner: str | None) -> list[tuple[Function, str | None]]:
        if isinstance(func, ast.Name) and func.id in self.functions:
            return [(self.functions[func.id], None)]
        if (
            owner is not None
            and isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in ("self", "cls")
            and (owner, func.attr) in self.methods
        ):
            return [(self.methods[(owner, func.attr)], owner)]
        return []

    def _catches(self, caught: frozenset[str], name: str) -> bool:
        if name in caught or caught & {"Exception", "BaseException"}:
            return True
        raised = self.namespace.get(name)
        return inspect.isclass(raised) and any(
            inspect.isclass(base := self.namespace.get(handler)) and issubclass(raised, base)
            for handler in caught
        )


def public_functions(tree: ast.Module) -> Iterator[tuple[str, str | None, Function, str]]:
    """(qualified name, owning class, function, the class docstring's Raises section) of each public
    function and method that is held to the rule."""

    def held(node: ast.stmt) -> bool:
        return (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and not node.name.startswith("_")
            and not _decorator_names(node) & (VALIDATORS | CLICK)
        )

    for node in tree.body:
        if held(node):
            assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            yield node.name, None, node, ""
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            stated = (ast.get_docstring(node) or "").partition("Raises:")[2]
            for item in node.body:
                if held(item):
                    assert isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    yield f"{node.name}.{item.name}", node.name, item, stated


def lacking(tree: ast.Module, namespace: dict[str, object] | None = None) -> dict[str, set[str]]:
    """Each public function's raised classes that neither its nor its class's Raises: names."""
    raises = Raises(tree, namespace)
    missing: dict[str, set[str]] = {}
    for name, owner, function, stated in public_functions(tree):
        section = (ast.get_docstring(function) or "").partition("Raises:")[2] + "\n" + stated
        unnamed = {
            cls for cls in raises.of(function, owner) - SIGNAL_NAMES if not re.search(rf"\b{cls}\b", section)
        }
        if unnamed:
            missing[name] = unnamed
    return missing


def undocumented_raises() -> dict[str, set[str]]:
    missing: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        dotted = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")
        namespace = vars(importlib.import_module(dotted)) if not dotted.endswith("__main__") else {}
        for name, names in lacking(ast.parse(path.read_text(encoding="utf-8")), namespace).items():
            missing[f"{path.relative_to(ROOT.parent)}:{name}"] = names
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
    assert lacking(ast.parse(source)) == {"loud": {"ValueError"}}


def test_the_raises_rule_follows_the_modules_own_helpers_less_what_is_caught() -> None:
    source = '''
class Store:
    """A store.

    Raises:
        Unavailable: from every method.
    """

    def read(self):
        """Summary."""
        return self._call()

    def write(self):
        """Summary."""
        return _present(self._call())

    def careful(self):
        """Summary."""
        try:
            return _present(None)
        except LookupError:
            return None

    def _call(self):
        raise Unavailable()


def _present(record):
    if record is None:
        raise NotFound()
    return _again(record)


def _again(record):
    return _present(record)  # a cycle ends


def outer():
    """Summary."""
    return _present(None)
'''

    class NotFoundError(LookupError):
        pass

    found = lacking(ast.parse(source), {"NotFound": NotFoundError, "LookupError": LookupError})
    # Unavailable is stated on the class; NotFound reaches `write` and `outer` through `_present`,
    # and `careful` catches it by its base class.
    assert found == {"Store.write": {"NotFound"}, "outer": {"NotFound"}}
