"""The engine frameworks gco serves, one module each, and the registry the rest of gco reads.

Each module (`vllm`, `tgi`, `sglang`) holds everything that differs by framework (`base.Framework`):
launch arguments and environment, ports, request and answer shapes (streamed too), metric names,
its start-up log and launch-command formats, and what the validation matrix launches and reads. The
spec's allowed `framework` values, the CLI's `--framework` choices, the pod renderer, invoke, the
local stack's engine table, the fake engine's styles and the bench's log parser all ask the registry
(`registry`), so a new framework is one new module and its line in the registry (docs/engines.md).

Pure core: the standard library and `gco.errors` only, no client of any service, nothing else of gco.
"""

from __future__ import annotations

from gco.engines.base import Framework, Launch, LaunchRead
from gco.engines.errors import EngineError, FrameworkRegistrationError, UnknownFrameworkError
from gco.engines.registry import DEFAULT, frameworks, get, launched, names, register, unregister

__all__ = [
    "DEFAULT",
    "EngineError",
    "Framework",
    "FrameworkRegistrationError",
    "Launch",
    "LaunchRead",
    "UnknownFrameworkError",
    "frameworks",
    "get",
    "launched",
    "names",
    "register",
    "unregister",
]
