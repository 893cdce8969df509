"""The command line of a Python child: this interpreter, safe from the working directory.

Imports nothing but `sys`: the fake engine, which starts without pydantic, uses it too.
"""

from __future__ import annotations

import sys

# `python -m` puts the working directory first on sys.path, so run from a folder that holds a `gco/`
# (or `pip/`) directory a child would import that folder instead of the installed package. `-P`
# (Python 3.11+: "don't prepend a potentially unsafe path to sys.path", the command line docs) keeps
# the working directory off sys.path and nothing else: the child keeps the caller's working directory
# (the relative paths a user gave still resolve) and its environment (PYTHONPATH included; `-I`
# would drop both it and the user's site-packages).
PYTHON = (sys.executable, "-P")


def python_module(module: str, *args: str) -> list[str]:
    """The command line that runs `python -m module args...` with this interpreter, whatever the
    working directory holds."""
    return [*PYTHON, "-m", module, *args]
