"""The hard gates (CUDA graphs on, no GPU offload) as each engine family's logged settings decide them.

Rules, each from the engine's own source or documentation:
- vLLM V0 (0.6's `Initializing an LLM engine`, `a V0 LLM engine`): the model runner captures CUDA graphs
  unless `enforce_eager` (vllm/worker/model_runner.py, "Capturing the model for CUDA graphs ... To run the
  model in eager mode, set 'enforce_eager=True'").
- vLLM V1 (`a V1 LLM engine`): off with `enforce_eager`; else the printed `compilation_config` decides:
  `cudagraph_mode` (0.10 on; 0 is CUDAGraphMode.NONE) when present, otherwise graphs need level 3
  (PIECEWISE) and `use_cudagraph` (vllm/v1/worker/gpu_model_runner.py 0.8-0.9: `use_cuda_graph =
  level == CompilationLevel.PIECEWISE and use_cudagraph and not enforce_eager`).
  The config line never prints `cpu_offload_gb`: offload is read from the arguments vLLM logs
  (0.6-0.8's `args: Namespace(...)`, which lists every argument; 0.9 on `non-default args: {...}`, which
  lists only those given) and from the launch command (`launchfacts`).
- SGLang: `ServerArgs(...)` lists every field: `disable_cuda_graph`, `cpu_offload_gb`,
  `enable_hierarchical_cache` (KV cache kept in host memory).
- TGI: `Args { cuda_graphs: None }` means the launcher's default capture sizes ("Using default cuda
  graphs [1, 2, 4, 8, 16, 32]" follows in the log); `Some([0])` turns them off. The launcher has no
  CPU-offload option, so an Args block proves no offload.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from gco.bench.launchfacts import OFFLOADING_CONNECTORS, PIECEWISE_LEVEL, LaunchFacts, positive
from gco.engines.logsyntax import json_object

OFFLOAD_KEYS = ("cpu_offload_gb", "kv_offloading_size")
TGI_GRAPHS_OFF = ("Some([0])", "Some([])", "[0]", "[]")


class Gates(BaseModel):
    """Each gate's state (None: not decided) and the evidence that decided it."""

    model_config = ConfigDict(frozen=True)

    cuda_graphs: bool | None = None
    gpu_offload: bool | None = None
    attention_fallback: bool = False
    evidence: dict[str, list[str]] = Field(default_factory=dict)


def truthy(value: str | None) -> bool | None:
    """A logged boolean ("True", "true", "1"); None when absent."""
    if value is None:
        return None
    return value.strip().lower() in ("true", "1", "yes")


def vllm_graphs(engine: str | None, settings: Mapping[str, str]) -> tuple[bool | None, str | None]:
    """(CUDA graphs on, the setting that says so) from a vLLM config line; (None, None) if it cannot tell."""
    eager = truthy(settings.get("enforce_eager"))
    if eager:
        return False, "config enforce_eager=True"
    if eager is None:
        return None, None
    if engine != "V1":
        return True, "config enforce_eager=False (V0 captures unless eager)"
    compilation = json_object(settings.get("compilation_config"))
    if compilation is None:
        return None, None
    mode = compilation.get("cudagraph_mode")
    if mode is not None:
        on = str(mode).upper() not in ("0", "NONE")
        return on, f"config compilation_config cudagraph_mode={json.dumps(mode, separators=(',', ':'))}"
    level, use = compilation.get("level"), compilation.get("use_cudagraph")
    on = level == PIECEWISE_LEVEL and use is not False
    return on, f"config compilation_config level={level} use_cudagraph={json.dumps(use)}"


def vllm_args_offload(args: Mapping[str, str], lists_all: bool) -> tuple[bool | None, list[str]]:
    """Offload from vLLM's logged arguments; `lists_all` (a Namespace) lets their absence prove no offload."""
    found = [f"{key}={args[key]}" for key in OFFLOAD_KEYS if positive(args.get(key))]
    connector = (json_object(args.get("kv_transfer_config")) or {}).get("kv_connector")
    if connector in OFFLOADING_CONNECTORS:
        found.append(f"kv_transfer_config kv_connector={connector}")
    if found:
        return True, found
    return (False if lists_all and "cpu_offload_gb" in args else None), []


def sglang_gates(settings: Mapping[str, str]) -> tuple[bool | None, bool | None, list[str]]:
    """(graphs on, offload, evidence) from SGLang's ServerArgs."""
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
    return graphs, offload, found


def tgi_graphs(settings: Mapping[str, str]) -> bool | None:
    """CUDA graphs on from TGI's Args `cuda_graphs`; None when the block does not show it."""
    value = settings.get("cuda_graphs")
    if value is None:
        return None
    return "".join(value.split()) not in TGI_GRAPHS_OFF


def combine(log: Gates, launch: LaunchFacts | None) -> Gates:
    """The log's gates with the launch command's facts: a violation from either wins, then a decided state."""
    if launch is None:
        return log
    evidence = {key: list(values) for key, values in log.evidence.items()}
    for gate, found in (
        ("gpu offload", launch.offload),
        ("cuda graphs off", launch.cuda_graphs_off),
        ("attention fallback", launch.attention_fallback),
    ):
        if found:
            evidence.setdefault(gate, []).extend(found)
    graphs = False if launch.cuda_graphs_off else log.cuda_graphs
    if launch.cuda_graphs_off and "cuda graphs" in evidence:  # the launch turned off what the log shows on
        evidence["cuda graphs on in the log"] = evidence.pop("cuda graphs")
    if launch.offload:
        offload: bool | None = True
    elif log.gpu_offload is None and launch.offload_decided:
        offload = False
        evidence.setdefault("no gpu offload", []).append("launch command: no offload option")
    else:
        offload = log.gpu_offload
    return Gates(
        cuda_graphs=graphs,
        gpu_offload=offload,
        attention_fallback=log.attention_fallback or bool(launch.attention_fallback),
        evidence=evidence,
    )
