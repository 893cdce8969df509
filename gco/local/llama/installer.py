"""The command lines that install packages into the environment being set up: uv's where the lock
pins uv, else pip's.

pip installs the demo's lock (84 packages, hashes checked, no bytecode) in about 55 s of CPU from an
empty cache; uv, a Rust implementation of the same `pip install` interface, installs the same files
with the same hashes checked in about 8 s (measured alone on a 2-core machine: docs/benchmarks.md).
On a first `make demo` those seconds are taken from the llama.cpp compile that runs beside them.

What differs between the two and is spelled here once:
- bytecode: pip byte-compiles what it installs unless told `--no-compile`; uv compiles nothing unless
  told `--compile-bytecode` ("the entire site-packages directory", uv's docs for `uv pip install`,
  so a later install with the flag compiles what an earlier one left);
- the environment: pip is run by the environment's own interpreter (`python -m pip`); uv is run the
  same way (`python -m uv`: the `uv` package's module finds its binary beside it and executes it)
  and told the interpreter to install for (`--python`), not left to find one from `VIRTUAL_ENV`
  or the working directory;
- where they read packages: pip reads pip's configuration (an extra index, a find-links folder);
  uv reads PyPI unless told otherwise (it does not read pip's configuration files). Both check every
  file against the lock's hashes (`--require-hashes`), so either yields the same files.

Imports nothing but the standard library: the set-up runs before any dependency is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

UV: Final = "uv"  # the distribution (and module) name a lock pins the installer under
Tool = Literal["pip", "uv"]


@dataclass(frozen=True)
class Installer:
    """`install` builds the command line of one `pip install` (or `uv pip install`) into the
    environment of `python` (its interpreter first: the argv prefix that runs it)."""

    python: Sequence[str]
    tool: Tool = "pip"

    def install(self, *args: str, byte_compile: bool = True) -> list[str]:
        """The command line that installs `args` (requirements and pip's options, which uv takes with
        the same spelling), quietly, with or without the bytecode."""
        if self.tool == UV:
            bytecode = ["--compile-bytecode"] if byte_compile else []
            target = ["--python", self.python[0]]
            return [*self.python, "-m", UV, "pip", "install", "--quiet", *target, *bytecode, *args]
        bytecode = [] if byte_compile else ["--no-compile"]
        return [*self.python, "-m", "pip", "install", "--quiet", *bytecode, *args]
