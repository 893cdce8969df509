"""SGLang's start-up lines (`sglang.log`, from tests/fixtures/engine_logs/sglang-offline-engine.log).

`--disable-cuda-graph`, `--cpu-offload-gb N` and `--enable-hierarchical-cache` show as the
`ServerArgs(...)` fields of the same names.
"""

from __future__ import annotations

from gco.bench.fake_engine.startup.base import EngineFlags, StartupTemplate


class SglangStartup(StartupTemplate):
    template = "sglang.log"

    def values(self, flags: EngineFlags) -> dict[str, str]:
        return {
            "model": flags.model,
            "port": str(flags.port),
            "disable_cuda_graph": str(flags.disable_cuda_graph),
            "cpu_offload_gb": f"{flags.cpu_offload_gb:g}",
            "enable_hierarchical_cache": str(flags.enable_hierarchical_cache),
        }
