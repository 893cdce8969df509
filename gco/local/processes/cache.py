"""Where gco keeps what it builds once per machine and reuses (llama.cpp's wheel, the local stack's
synthesized app): `$XDG_CACHE_HOME/gco`, else `~/.cache/gco` (the XDG base directory specification's
cache home)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_HOME_ENV = "XDG_CACHE_HOME"


def gco_cache(*parts: str) -> Path:
    """gco's folder in the user's cache home, or a path under it (`gco_cache("wheels")`); read from
    the environment at each call, so a test or a simulated fresh machine can point it elsewhere."""
    return Path(os.environ.get(CACHE_HOME_ENV) or Path.home() / ".cache", "gco", *parts)
