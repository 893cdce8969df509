"""The engine frameworks gco serves, one module each, and the registry the rest of gco reads.

Each module (`vllm`, `tgi`, `sglang`) holds how a framework launches and how it is spoken to
(`base.Framework`): launch arguments and environment, ports, request and answer shapes (streamed
too), metric names. The spec's allowed `framework` values, the CLI's `--framework` choices, the pod
renderer, invoke, the local stack's engine table and the fake engine's styles ask the registry
(`registry`), so a new framework is one new module and its line in the registry (docs/engines.md).
What only a test or a benchmark needs lives with it, in a registry of its own keyed by framework
name: the bench's log rules (`gco.bench.analysis.logrules`), the fake engine's start-up templates
(`gco.bench.fake_engine.startup`), the matrix's adapters (`gco.validation.frameworks`).

Pure core: the standard library and `gco.errors` only, no client of any service, nothing else of gco.
"""

from __future__ import annotations

from gco.engines.base import Framework, Launch, LaunchRead
from gco.engines.errors import (
    EngineError,
    FrameworkRegistrationError,
    MissingFrameworkEntryError,
    UnknownFrameworkError,
)
from gco.engines.registry import (
    DEFAULT,
    entry,
    frameworks,
    get,
    launched,
    names,
    register,
    uncovered,
    unregister,
)

__all__ = [
    "DEFAULT",
    "EngineError",
    "Framework",
    "FrameworkRegistrationError",
    "Launch",
    "LaunchRead",
    "MissingFrameworkEntryError",
    "UnknownFrameworkError",
    "entry",
    "frameworks",
    "get",
    "launched",
    "names",
    "register",
    "uncovered",
    "unregister",
]
