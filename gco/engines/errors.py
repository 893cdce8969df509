"""The engine registry's errors, below gco's root (`gco.errors`):

GcoError
└── EngineError
    ├── UnknownFrameworkError       no framework is registered under the name asked for
    ├── FrameworkRegistrationError  a second framework of one name, or the default removed
    └── MissingFrameworkEntryError  a registered framework has no entry in a per-concern registry
"""

from __future__ import annotations

from gco.errors import GcoError


class EngineError(GcoError):
    """Root of the engine registry's errors."""


class UnknownFrameworkError(EngineError):
    """No framework is registered under the name asked for."""


class FrameworkRegistrationError(EngineError):
    """A framework cannot be registered (its name is taken) or removed (it is the default)."""


class MissingFrameworkEntryError(EngineError):
    """A registered framework has no entry in a per-concern registry keyed by framework name (the
    bench's log rules, the fake engine's start-up templates, the matrix's adapters)."""
