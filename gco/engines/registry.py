"""The registry of engine frameworks: the built-in ones (vLLM, TGI, SGLang) registered on import, in
the order the spec's schema and the CLI list them, and any a caller (a test) adds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from gco.engines.base import Framework, LaunchRead
from gco.engines.errors import FrameworkRegistrationError, UnknownFrameworkError
from gco.engines.sglang import Sglang
from gco.engines.tgi import Tgi
from gco.engines.vllm import Vllm

DEFAULT = Vllm.name  # a spec that names no framework serves vLLM

_REGISTRY: dict[str, Framework] = {}


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


for _builtin in (Vllm(), Tgi(), Sglang()):
    register(_builtin)
