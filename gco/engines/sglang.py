"""SGLang: its OpenAI-compatible server (`python -m sglang.launch_server`).

- Launch (docs.sglang.ai "Server Arguments"): `--model-path`, `--host`, `--port`, `--tp` for more
  than one GPU; it listens on 127.0.0.1 unless told, so the pod's interface is named.
- Requests: the OpenAI completions protocol, as vLLM's (`gco.engines.vllm.OpenAICompletions`).
- Metrics: no queue metric is read for it (queue_depth autoscaling reads vLLM's and TGI's).
- Start-up log: `server_args=ServerArgs(...)`, which lists every field: `disable_cuda_graph`,
  `cpu_offload_gb`, `enable_hierarchical_cache` (KV cache kept in host memory), `attention_backend`;
  `Attention backend not specified. Use fa3 backend by default.` when that field is None.
- Launch command: `--cpu-offload-gb N`, `--enable-hierarchical-cache` (HiCache), `--disable-cuda-graph`,
  `--attention-backend torch_native` (the fallback kernels).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from gco.engines.base import (
    ATTENTION_FALLBACK,
    GRAPHS_OFF,
    OFFLOAD,
    ArgumentDump,
    ConfigBlock,
    EngineFlags,
    Launch,
    LaunchRead,
    LogGates,
    flag_value,
)
from gco.engines.logsyntax import pairs, positive, strip_call, truthy
from gco.engines.vllm import OpenAICompletions

SERVER_ARGS = re.compile(r"server_args=ServerArgs\((?P<body>.*)$")
ALL_INTERFACES = "0.0.0.0"  # noqa: S104 - the pod's own interface


class Sglang(OpenAICompletions):
    name = "sglang"
    label = "SGLang"
    default_port = 30000
    program = re.compile(r"\bsglang\b")
    backend_lines = (re.compile(r"Attention backend not specified\. Use (?P<b>\w+) backend by default"),)
    fallback_backends = ("torch_native",)
    backend_setting = "attention_backend"

    def launch_args(self, launch: Launch) -> list[str]:
        args = ["--host", ALL_INTERFACES, "--port", str(launch.port)]
        if launch.model:
            args = ["--model-path", launch.model, *args]
        if launch.gpus > 1:
            args += ["--tp", str(launch.gpus)]
        return args

    def launch_env(self, launch: Launch) -> dict[str, str]:
        return {}

    def read_launch(self, args: Sequence[str], env: Mapping[str, str]) -> LaunchRead | None:
        if "--model-path" not in args:
            return None
        return LaunchRead(model=flag_value(args, "--model-path"), revision="")

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

    def startup_values(self, flags: EngineFlags) -> dict[str, str]:
        return {
            "model": flags.model,
            "port": str(flags.port),
            "disable_cuda_graph": str(flags.disable_cuda_graph),
            "cpu_offload_gb": f"{flags.cpu_offload_gb:g}",
            "enable_hierarchical_cache": str(flags.enable_hierarchical_cache),
        }
