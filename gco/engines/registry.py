"""The registry of engine frameworks: the built-in ones (vLLM, TGI, SGLang) registered on import, in
the order the spec's schema and the CLI list them, and any a caller (a test) adds.

What gco does with a framework beyond launching it and speaking its protocol lives with the part that
does it, in a registry of its own keyed by framework name (the bench's log rules, the fake engine's
start-up templates, the matrix's adapters); `entry` reads one, `uncovered` says which registered
frameworks one lacks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

from gco.engines.base import Framework, LaunchRead
from gco.engines.errors import FrameworkRegistrationError, MissingFrameworkEntryError, UnknownFrameworkError
from gco.engines.sglang import Sglang
from gco.engines.tgi import Tgi
from gco.engines.vllm import Vllm

DEFAULT = Vllm.name  # a spec that names no framework serves vLLM

_REGISTRY: dict[str, Framework] = {}
Entry = TypeVar("Entry")


def register(framework: Framework) -> Framework:
    """Add `framework` under its name (after those already registered); returns it.

    Raises:
        FrameworkRegistrationError: a framework of that name is registered already.
    """
    if framework.name in _REGISTRY:
        raise FrameworkRegistrationError(f"framework {framework.name!r} is registered already")
    _REGISTRY[framework.name] = framework
    return framework


def unregister(name: str) -> None:
    """Remove the framework `name` (a test's own, after the test).

    Raises:
        FrameworkRegistrationError: `name` is the default framework, which every spec without a
            framework serves.
    """
    if name == DEFAULT:
        raise FrameworkRegistrationError(f"the default framework {DEFAULT!r} cannot be removed")
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    """The registered framework names, in registration order (the spec's allowed values)."""
    return tuple(_REGISTRY)


def frameworks() -> Iterator[Framework]:
    """The registered frameworks, in registration order."""
    return iter(tuple(_REGISTRY.values()))


def get(name: str) -> Framework:
    """The framework registered as `name`.

    Raises:
        UnknownFrameworkError: no framework is registered under that name.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownFrameworkError(f"no engine framework {name!r} is registered") from None


def launched(args: Sequence[str], env: Mapping[str, str]) -> tuple[Framework, LaunchRead]:
    """The framework whose launch a container's `args` and `env` carry, and what it serves: the first
    registered one that reads them; the default framework (serving its image's own model) if none."""
    for framework in frameworks():
        read = framework.read_launch(args, env)
        if read is not None:
            return framework, read
    return _REGISTRY[DEFAULT], LaunchRead(model="", revision="")  # registered below; never removed


def entry(table: Mapping[str, Entry], name: str, concern: str) -> Entry:
    """Framework `name`'s entry in `table`, a per-concern registry keyed by framework name (`concern`
    names it in the error).

    Raises:
        UnknownFrameworkError: no framework is registered under `name`.
        MissingFrameworkEntryError: `name` is registered but `table` has no entry for it.
    """
    get(name)
    try:
        return table[name]
    except KeyError:
        raise MissingFrameworkEntryError(f"engine framework {name!r} has no {concern}") from None


def uncovered(table: Mapping[str, object]) -> tuple[str, ...]:
    """The registered frameworks that `table`, a per-concern registry, has no entry for."""
    return tuple(name for name in _REGISTRY if name not in table)


for _builtin in (Vllm(), Tgi(), Sglang()):
    register(_builtin)
