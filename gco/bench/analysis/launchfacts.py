"""What the command the harness launched says about the hard gates: its argv and environment are facts.

An engine's log can be silent (vLLM's `with config:` line never prints `cpu_offload_gb`) or only
self-report; the argv and env that `bench rounds` passed are known for certain. The command is read as
the launch of an engine family (its program names it, `family_hint`), whose log rules (`logrules`)
say which flags and variables turn CUDA graphs off, offload to CPU memory or select a fallback
attention backend (each citing the engine's own `--help` or documentation).

A `--config FILE` (vLLM, SGLang) can set any option, so such a launch decides no "off"/"no offload" state.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gco import engines
from gco.bench.analysis import logrules

Family = str
CONFIG_FILE_FLAG = "--config"
SHELLS = ("sh", "bash", "dash", "zsh")


class LaunchCommand(BaseModel):
    """The argv and the environment the harness started an engine with."""

    model_config = ConfigDict(frozen=True)

    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)


class LaunchFacts(BaseModel):
    """Gate evidence read from a launch command; each entry names the flag or variable it came from."""

    model_config = ConfigDict(frozen=True)

    offload: list[str] = Field(default_factory=list)
    cuda_graphs_off: list[str] = Field(default_factory=list)
    attention_fallback: list[str] = Field(default_factory=list)
    offload_decided: bool = False


def tokens(argv: Sequence[str]) -> list[str]:
    """argv with a shell's command string (`bash -c "vllm serve ..."`) split into its words."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        shell_string = i >= 2 and argv[i - 1] == "-c" and Path(argv[i - 2]).name in SHELLS
        if shell_string:
            try:
                out.extend(shlex.split(arg))
                continue
            except ValueError:
                pass
        out.append(arg)
    return out


def family_hint(argv: Sequence[str]) -> Family | None:
    """The registered engine family whose program or module the command names, or None. A command
    naming several is read as the first registered one other than the default, then the default: a
    command may name vLLM in passing (a model or log path) while it launches another engine.

    Raises:
        MissingFrameworkEntryError: a registered framework has no log rules (`logrules.LOG_RULES`).
    """
    text = " ".join(tokens(argv))
    marked = [
        name
        for name, rules in logrules.registered()
        if rules.program is not None and rules.program.search(text)
    ]
    marked.sort(key=lambda name: name == engines.DEFAULT)
    return marked[0] if marked else None


def options(argv: Sequence[str]) -> dict[str, list[str]]:
    """`--flag value`, `--flag=value` and bare `--flag` (value "") by name, a long name's `_` read as `-`."""
    words = tokens(argv)
    found: dict[str, list[str]] = {}
    for i, word in enumerate(words):
        if not word.startswith("-") or word in ("-", "--"):
            continue
        name, eq, value = word.partition("=")
        if re.fullmatch(r"-O\d", name):  # vLLM's -O3 shorthand for --compilation-config 3
            name, eq, value = "-O", "=", name[2:]
        key = name.replace("_", "-") if name.startswith("--") else name
        if not eq:
            following = words[i + 1] if i + 1 < len(words) else ""
            value = following if following and not following.startswith("--") else ""
        found.setdefault(key, []).append(value)
    return found


def launch_facts(command: LaunchCommand, family: Family | None) -> LaunchFacts:
    """The gate evidence in `command` read as a launch of `family` (its own hint when None).

    Raises:
        MissingFrameworkEntryError: a registered framework has no log rules (`logrules.LOG_RULES`).
    """
    family = family or family_hint(command.argv)
    opts = options(command.argv)
    known = family in engines.names()
    found = logrules.rules_for(family).launch_facts(opts, command.env) if family is not None and known else {}
    return LaunchFacts(**found, offload_decided=known and CONFIG_FILE_FLAG not in opts)
