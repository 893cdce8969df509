"""The engine frameworks gco serves, one module each, and the registry the rest of gco reads.

Each module (`vllm`, `tgi`, `sglang`) holds everything that differs by framework (`base.Framework`):
launch arguments and environment, ports, request and answer shapes (streamed too), the queue metric,
its start-up log and launch-command formats, and what the validation matrix launches and reads. The
spec's allowed `framework` values, the CLI's `--framework` choices, the pod renderer, invoke, the
local stack's engine table, the fake engine's styles and the bench's log parser all ask this
registry, so a new framework is one new module registered here (docs/engines.md).

Pure core: the standard library only, no client of any service, nothing from the rest of gco.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from gco.engines.base import Framework, LaunchRead
from gco.engines.sglang import Sglang
from gco.engines.tgi import Tgi
from gco.engines.vllm import Vllm

DEFAULT = Vllm.name  # a spec that names no framework serves vLLM

_REGISTRY: dict[str, Framework] = {}


class UnknownFrameworkError(KeyError):
    """A framework name no module registered."""


def register(framework: Framework) -> Framework:
    """Add `framework` under its name (after those already registered); returns it.

    Raises:
        ValueError: a framework of that name is registered already.
    """
    if framework.name in _REGISTRY:
        raise ValueError(f"framework {framework.name!r} is registered already")
    _REGISTRY[framework.name] = framework
    return framework


def unregister(name: str) -> None:
    """Remove the framework `name` (a test's own, after the test).

    Raises:
        ValueError: `name` is the default framework, which every spec without a framework serves.
    """
    if name == DEFAULT:
        raise ValueError(f"the default framework {DEFAULT!r} cannot be removed")
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
        raise UnknownFrameworkError(name) from None


def launched(args: Sequence[str], env: Mapping[str, str]) -> tuple[Framework, LaunchRead]:
    """The framework whose launch a container's `args` and `env` carry, and what it serves: the first
    registered one that reads them; the default framework (serving its image's own model) if none."""
    for framework in frameworks():
        read = framework.read_launch(args, env)
        if read is not None:
            return framework, read
    return get(DEFAULT), LaunchRead(model="", revision="")


for _builtin in (Vllm(), Tgi(), Sglang()):
    register(_builtin)
