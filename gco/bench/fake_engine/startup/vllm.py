"""vLLM 0.11's start-up lines (`vllm.log`, from tests/fixtures/engine_logs/vllm-0.11-serve.log).

`--enforce-eager` shows as the config line's `enforce_eager=True` and `cudagraph_mode` 0
(CUDAGraphMode.NONE); `--cpu-offload-gb N`, as in vLLM 0.9 on, shows only in `non-default args: {...}`
(vllm/entrypoints/utils.py logs the arguments that differ from their defaults).
"""

from __future__ import annotations

from gco.bench.fake_engine.startup.base import EngineFlags, StartupTemplate


def non_default(flags: EngineFlags) -> str:
    """The `non-default args` dict repr for what a stand-in was given (the model and the port always are)."""
    args: dict[str, object] = {"model_tag": flags.model, "port": flags.port, "model": flags.model}
    if flags.enforce_eager:
        args["enforce_eager"] = True
    if flags.cpu_offload_gb:
        args["cpu_offload_gb"] = flags.cpu_offload_gb
    return repr(args)


class VllmStartup(StartupTemplate):
    template = "vllm.log"

    def values(self, flags: EngineFlags) -> dict[str, str]:
        return {
            "model": flags.model,
            "quantization": "None",
            "enforce_eager": str(flags.enforce_eager),
            "cudagraph_mode": "0" if flags.enforce_eager else "[2,1]",
            "non_default_args": non_default(flags),
        }
