"""TGI's start-up log and launch command (`text-generation-launcher`), as the bench reads them.

- Start-up log: `text_generation_launcher: Args { ... }` on one line or pretty-printed over many;
  attention: `Using attention flashinfer - Prefix caching true` (launcher) and `Using Attention =
  flashinfer` (shard); `paged` is the non-flash fallback (real copies, each naming its source, are in
  tests/fixtures/engine_logs).
- Gates: `Args { cuda_graphs: None }` means the launcher's default capture sizes ("Using default
  cuda graphs [1, 2, 4, 8, 16, 32]" follows in the log); `Some([0])` turns them off. The launcher has
  no CPU-offload option (docs "Text-generation-launcher arguments"), so an Args block proves no
  offload. Launch command: `--cuda-graphs 0` or `CUDA_GRAPHS=0` disables CUDA graphs;
  `ATTENTION=paged` selects the paged kernels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from gco.bench.analysis.logrules.base import (
    ATTENTION_FALLBACK,
    GRAPHS_OFF,
    OFFLOAD,
    ArgumentDump,
    ConfigBlock,
    LogGates,
    LogRules,
)
from gco.bench.analysis.logrules.syntax import pairs

ARGS = re.compile(r"\bArgs \{(?P<body>.*)$")
GRAPHS_OFF_VALUES = ("Some([0])", "Some([])", "[0]", "[]")
MAX_BLOCK_LINES = 400


def args_block(first: str, rest: Sequence[str]) -> str:
    """The body of the Args block: one line, or the pretty-printed lines up to the closing brace."""
    if first.rstrip().endswith("}"):
        return first.rstrip()[:-1]
    body = [first]
    for count, line in enumerate(rest):
        if line.strip() == "}" or count >= MAX_BLOCK_LINES:
            break
        body.append(line)
    return " ".join(body)


def graphs_on(settings: Mapping[str, str]) -> bool | None:
    """CUDA graphs on from the Args' `cuda_graphs`; None when the block does not show it."""
    value = settings.get("cuda_graphs")
    if value is None:
        return None
    return "".join(value.split()) not in GRAPHS_OFF_VALUES


class TgiLogRules(LogRules):
    program = re.compile(r"text-generation-launcher|text_generation_server")
    backend_lines = (
        re.compile(r"\bUsing Attention = (?P<b>[\w-]+)"),
        re.compile(r"\bUsing attention (?P<b>[\w-]+) - Prefix caching"),
    )
    fallback_backends = ("paged",)

    def config_block(self, line: str, following: Sequence[str]) -> ConfigBlock | None:
        found = ARGS.search(line)
        return None if found is None else ConfigBlock(pairs(args_block(found["body"], following), ":"))

    def log_gates(self, block: ConfigBlock | None, dumps: Sequence[ArgumentDump]) -> LogGates:
        if block is None:
            return LogGates()
        return LogGates(cuda_graphs=graphs_on(block.settings), gpu_offload=False)

    def launch_facts(self, options: Mapping[str, list[str]], env: Mapping[str, str]) -> dict[str, list[str]]:
        graphs = options.get("--cuda-graphs", []) + ([env["CUDA_GRAPHS"]] if "CUDA_GRAPHS" in env else [])
        off = [f"--cuda-graphs/CUDA_GRAPHS {v}" for v in graphs if v.strip() == "0"]
        fallback = ["env ATTENTION=paged"] if env.get("ATTENTION", "").lower() == "paged" else []
        return {OFFLOAD: [], GRAPHS_OFF: off, ATTENTION_FALLBACK: fallback}
