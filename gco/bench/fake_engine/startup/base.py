"""What a framework's start-up template is: the lines the fake engine logs as that engine, and its flags.

A template is a file of lines copied, in order, from a real log in tests/fixtures/engine_logs (which
names its source), with `${...}` where the fake puts its model, port and the settings its flags set;
its class fills those values from the flags and may drop a line the real engine would not print for
them. Standard library only: the fake engine starts once per bench cell and local replica.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class EngineFlags:
    """The real-engine flags a stand-in engine accepts and shows in its start-up log."""

    model: str
    port: int
    enforce_eager: bool = False
    cpu_offload_gb: float = 0.0
    disable_cuda_graph: bool = False
    enable_hierarchical_cache: bool = False
    cuda_graphs: str | None = None


class StartupTemplate:
    """One framework's start-up lines; the default logs none (no real log copied for it yet)."""

    # The template's file beside this module (None: no lines).
    template: str | None = None

    def lines(self) -> list[str]:
        """The template's lines, comment lines (`#`, where the file names its source) dropped."""
        if self.template is None:
            return []
        text = resources.files(__package__).joinpath(self.template).read_text(encoding="utf-8")
        return [line for line in text.splitlines() if not line.startswith("#")]

    def values(self, flags: EngineFlags) -> dict[str, str]:
        """The `${...}` values of the template for a stand-in launched with `flags`."""
        return {"model": flags.model, "port": str(flags.port)}

    def kept(self, line: str, flags: EngineFlags) -> bool:
        """Whether a template line stays in the log of a stand-in launched with `flags`."""
        return True
