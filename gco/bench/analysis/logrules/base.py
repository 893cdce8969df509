"""What a framework's log rules are: how the bench reads one engine family's start-up log and launch command.

A family's rules name its program in a launch command, the start-up lines that name its attention
backend or a fallback, the lines naming a setting it did not know, and how to read its configuration
block and argument dumps into the hard gates (`gco.bench.analysis.enginegates`). Every default says
"nothing logged", so a family whose log the bench cannot read yet still has an entry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# The bench's hard-gate evidence kinds, as `LaunchFacts` and the log gates name them.
OFFLOAD = "offload"
GRAPHS_OFF = "cuda_graphs_off"
ATTENTION_FALLBACK = "attention_fallback"
FACT_KINDS = (OFFLOAD, GRAPHS_OFF, ATTENTION_FALLBACK)


@dataclass(frozen=True)
class ConfigBlock:
    """An engine's own configuration block in its start-up log: engine generation, version, settings."""

    settings: dict[str, str]
    engine: str | None = None
    version: str | None = None


@dataclass(frozen=True)
class ArgumentDump:
    """The engine's dump of its own arguments (self-reported); `lists_all`: absent means default."""

    values: dict[str, str]
    lists_all: bool


@dataclass(frozen=True)
class LogGates:
    """CUDA graphs on and GPU offload as the log's configuration decides them (None: undecided)."""

    cuda_graphs: bool | None = None
    gpu_offload: bool | None = None
    evidence: dict[str, list[str]] = field(default_factory=dict)


class LogRules:
    """One engine family's log and launch-command formats. Class attributes are its patterns."""

    # Its program or module in a launch command (the bench reads a harness-started engine's family).
    program: re.Pattern[str] | None = None
    # Start-up log lines naming the attention backend (group `b`), backends that are fallbacks, and
    # lines saying the engine fell back.
    backend_lines: tuple[re.Pattern[str], ...] = ()
    fallback_backends: tuple[str, ...] = ()
    fallback_lines: tuple[re.Pattern[str], ...] = ()
    # Start-up log lines naming a setting the engine did not know (group `k`).
    unknown_lines: tuple[re.Pattern[str], ...] = ()
    # The configuration block's setting that names the attention backend, if it has one.
    backend_setting: str | None = None

    def config_block(self, line: str, following: Sequence[str]) -> ConfigBlock | None:
        """The configuration block `line` opens (`following`: the lines after it), or None."""
        return None

    def argument_dump(self, line: str) -> ArgumentDump | None:
        """The engine's self-reported argument dump on `line`, or None."""
        return None

    def log_gates(self, block: ConfigBlock | None, dumps: Sequence[ArgumentDump]) -> LogGates:
        """The gates its logged configuration decides (`block` None: only the dumps speak)."""
        return LogGates()

    def launch_facts(self, options: Mapping[str, list[str]], env: Mapping[str, str]) -> dict[str, list[str]]:
        """Gate evidence (FACT_KINDS -> entries) in a launch's options (`--flag` -> values) and env."""
        return {kind: [] for kind in FACT_KINDS}
