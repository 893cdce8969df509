"""SGLang's start-up log and launch command (`python -m sglang.launch_server`), as the bench reads them.

- Start-up log: `server_args=ServerArgs(...)`, which lists every field: `disable_cuda_graph`,
  `cpu_offload_gb`, `enable_hierarchical_cache` (KV cache kept in host memory), `attention_backend`;
  `Attention backend not specified. Use fa3 backend by default.` when that field is None (a real
  copy, naming its source, is tests/fixtures/engine_logs/sglang-offline-engine.log).
- Launch command (docs.sglang.ai "Server Arguments"): `--cpu-offload-gb N`,
  `--enable-hierarchical-cache` (HiCache), `--disable-cuda-graph`, `--attention-backend torch_native`
  (the fallback kernels).
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
from gco.bench.analysis.logrules.syntax import pairs, positive, strip_call, truthy

SERVER_ARGS = re.compile(r"server_args=ServerArgs\((?P<body>.*)$")


class SglangLogRules(LogRules):
    program = re.compile(r"\bsglang\b")
    backend_lines = (re.compile(r"Attention backend not specified\. Use (?P<b>\w+) backend by default"),)
    fallback_backends = ("torch_native",)
    backend_setting = "attention_backend"

    def config_block(self, line: str, following: Sequence[str]) -> ConfigBlock | None:
        found = SERVER_ARGS.search(line)
        return None if found is None else ConfigBlock(pairs(strip_call(found["body"]), "="))

    def log_gates(self, block: ConfigBlock | None, dumps: Sequence[ArgumentDump]) -> LogGates:
        if block is None:
            return LogGates()
        settings = block.settings
        disabled = truthy(settings.get("disable_cuda_graph"))
        graphs = None if disabled is None else not disabled
        found = (
            [f"server_args cpu_offload_gb={settings['cpu_offload_gb']}"]
            if positive(settings.get("cpu_offload_gb"))
            else []
        )
        if truthy(settings.get("enable_hierarchical_cache")):
            found.append("server_args enable_hierarchical_cache=True")
        offload = True if found else (False if "cpu_offload_gb" in settings else None)
        return LogGates(
            cuda_graphs=graphs, gpu_offload=offload, evidence={"gpu offload": found} if found else {}
        )

    def launch_facts(self, options: Mapping[str, list[str]], env: Mapping[str, str]) -> dict[str, list[str]]:
        offload = [f"argv --cpu-offload-gb {v}" for v in options.get("--cpu-offload-gb", []) if positive(v)]
        if "--enable-hierarchical-cache" in options:
            offload.append("argv --enable-hierarchical-cache")
        off = ["argv --disable-cuda-graph"] if "--disable-cuda-graph" in options else []
        torch_native = "torch_native" in options.get("--attention-backend", [])
        fallback = ["argv --attention-backend torch_native"] if torch_native else []
        return {OFFLOAD: offload, GRAPHS_OFF: off, ATTENTION_FALLBACK: fallback}
