"""vLLM's start-up log and launch command, as the bench's hard gates read them.

- Start-up log: `Initializing an LLM engine (v0.6.x) with config: k=v, ...` (V0), `Initializing a V1
  LLM engine (v0.8-0.11) with config: ...`; its argument dumps `args: Namespace(...)` (to 0.8, every
  argument) and `non-default args: {...}` (0.9 on, only those given); attention: `Using Flash
  Attention backend.` (V0 selector.py), `Using Flash Attention backend on V1 engine.`, `Cannot use
  FlashAttention-2 backend for head size 72.`; `Unknown vLLM environment variable detected: X`.
  Real copies, each naming its source, are in tests/fixtures/engine_logs.
- Gates: V0 captures CUDA graphs unless `enforce_eager` (vllm/worker/model_runner.py, "Capturing the
  model for CUDA graphs ... To run the model in eager mode, set 'enforce_eager=True'"). V1: off with
  `enforce_eager`; else the printed `compilation_config` decides: `cudagraph_mode` (0.10 on; 0 is
  CUDAGraphMode.NONE) when present, otherwise graphs need level 3 (PIECEWISE) and `use_cudagraph`
  (vllm/v1/worker/gpu_model_runner.py 0.8-0.9: `use_cuda_graph = level == CompilationLevel.PIECEWISE
  and use_cudagraph and not enforce_eager`). The config line never prints `cpu_offload_gb`: offload
  is read from the argument dumps and the launch command.
- Launch command (`vllm serve --help`): `--cpu-offload-gb N` (N > 0 offloads weights to CPU memory);
  `--kv-offloading-size N` and `--kv-offloading-backend` (KV cache offload, 0.11 on);
  `--kv-transfer-config` naming an offloading connector (`OffloadingConnector`, LMCache's
  `LMCacheConnectorV1`); `--enforce-eager`; `-O`/`--compilation-config` with `cudagraph_mode` NONE
  (0), `"use_cudagraph": false`, or a level other than 3 without a mode; the
  `VLLM_ATTENTION_BACKEND` environment variable naming a fallback backend (XFORMERS, TORCH_SDPA,
  FLEX_ATTENTION: vllm/envs.py).
"""

from __future__ import annotations

import json
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
from gco.bench.analysis.logrules.syntax import json_object, pairs, positive, python_dict, strip_call, truthy

OFFLOADING_CONNECTORS = ("OffloadingConnector", "LMCacheConnectorV1", "LMCacheConnector")
FALLBACK_ENV_BACKENDS = ("XFORMERS", "TORCH_SDPA", "FLEX_ATTENTION")
PIECEWISE_LEVEL = 3
CUDAGRAPH_NONE = ("0", "NONE")
OFFLOAD_KEYS = ("cpu_offload_gb", "kv_offloading_size")

CONFIG = re.compile(
    r"Initializing an? (?:(?P<engine>V[01]) )?LLM engine \((?P<version>[^)]*)\) with config: (?P<body>.*)$"
)
NAMESPACE = re.compile(r"\bargs: Namespace\((?P<body>.*)$")
NON_DEFAULT = re.compile(r"non-default args: (?P<body>\{.*)$")


def graphs_from_config(engine: str | None, settings: Mapping[str, str]) -> tuple[bool | None, str | None]:
    """(CUDA graphs on, the setting that says so) from a config line; (None, None) if it cannot tell."""
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
        on = str(mode).upper() not in CUDAGRAPH_NONE
        return on, f"config compilation_config cudagraph_mode={json.dumps(mode, separators=(',', ':'))}"
    level, use = compilation.get("level"), compilation.get("use_cudagraph")
    on = level == PIECEWISE_LEVEL and use is not False
    return on, f"config compilation_config level={level} use_cudagraph={json.dumps(use)}"


def args_offload(args: Mapping[str, str], lists_all: bool) -> tuple[bool | None, list[str]]:
    """Offload from logged arguments; `lists_all` (a Namespace) lets their absence prove no offload."""
    found = [f"{key}={args[key]}" for key in OFFLOAD_KEYS if positive(args.get(key))]
    connector = (json_object(args.get("kv_transfer_config")) or {}).get("kv_connector")
    if connector in OFFLOADING_CONNECTORS:
        found.append(f"kv_transfer_config kv_connector={connector}")
    if found:
        return True, found
    return (False if lists_all and "cpu_offload_gb" in args else None), []


def compilation_off(value: str) -> bool:
    """A -O/--compilation-config value that leaves CUDA graphs off."""
    config = json_object(value)
    if config is None:
        given = value.strip()
        return given.isdigit() and int(given) != PIECEWISE_LEVEL
    mode = config.get("cudagraph_mode")
    if mode is not None:
        return str(mode).upper() in CUDAGRAPH_NONE
    if config.get("use_cudagraph") is False:
        return True
    level = config.get("level", config.get("mode"))
    return isinstance(level, int) and level != PIECEWISE_LEVEL


class VllmLogRules(LogRules):
    program = re.compile(r"\bvllm\b")
    # "Using Transformers backend." names the model implementation, not the attention's.
    backend_lines = (re.compile(r"\bUsing (?!Transformers backend)(?P<b>[A-Za-z][\w -]*?) backend\b"),)
    fallback_backends = ("XFormers", "Torch SDPA", "FlexAttention")
    fallback_lines = (re.compile(r"Cannot use FlashAttention", re.IGNORECASE),)
    unknown_lines = (re.compile(r"Unknown vLLM environment variable detected: (?P<k>\S+)", re.IGNORECASE),)

    def config_block(self, line: str, following: Sequence[str]) -> ConfigBlock | None:
        found = CONFIG.search(line)
        if found is None:
            return None
        return ConfigBlock(
            pairs(found["body"], "="), engine=found["engine"] or "V0", version=found["version"]
        )

    def argument_dump(self, line: str) -> ArgumentDump | None:
        if found := NAMESPACE.search(line):
            return ArgumentDump(pairs(strip_call(found["body"]), "="), lists_all=True)
        if found := NON_DEFAULT.search(line):
            return ArgumentDump(python_dict(found["body"]), lists_all=False)
        return None

    def log_gates(self, block: ConfigBlock | None, dumps: Sequence[ArgumentDump]) -> LogGates:
        evidence: dict[str, list[str]] = {}
        if block is not None:
            graphs, why = graphs_from_config(block.engine, block.settings)
        else:  # only the self-reported arguments speak: an eager flag says off, nothing says on
            eager = truthy({k: v for dump in dumps for k, v in dump.values.items()}.get("enforce_eager"))
            graphs, why = (False, "logged args enforce_eager=True") if eager else (None, None)
        if why:
            evidence["cuda graphs"] = [why]
        listed = {k: v for dump in dumps if dump.lists_all for k, v in dump.values.items()}
        given = {k: v for dump in dumps if not dump.lists_all for k, v in dump.values.items()}
        offload, found = args_offload(listed, lists_all=True)
        extra, more = args_offload(given, lists_all=False)
        offload = True if extra else offload
        if found or more:
            evidence["gpu offload"] = [f"logged args {item}" for item in found + more]
        return LogGates(cuda_graphs=graphs, gpu_offload=offload, evidence=evidence)

    def launch_facts(self, options: Mapping[str, list[str]], env: Mapping[str, str]) -> dict[str, list[str]]:
        offload: list[str] = []
        for flag in ("--cpu-offload-gb", "--kv-offloading-size"):
            offload += [f"argv {flag} {v}" for v in options.get(flag, []) if positive(v)]
        offload += [f"argv --kv-offloading-backend {v}" for v in options.get("--kv-offloading-backend", [])]
        for value in options.get("--kv-transfer-config", []):
            connector = (json_object(value) or {}).get("kv_connector")
            if connector in OFFLOADING_CONNECTORS:
                offload.append(f"argv --kv-transfer-config kv_connector={connector}")
        off = ["argv --enforce-eager"] if "--enforce-eager" in options else []
        for flag in ("-O", "--compilation-config"):
            off += [f"argv {flag} {v}" for v in options.get(flag, []) if compilation_off(v)]
        for flag, values in options.items():  # 0.11's dotted form: -O.cudagraph_mode=NONE
            dotted = flag.replace("_", "-").lower()
            if dotted.startswith(("-o.cudagraph-mode", "--compilation-config.cudagraph-mode")):
                off += [f"argv {flag}={v}" for v in values if v.upper() in CUDAGRAPH_NONE]
        backend = env.get("VLLM_ATTENTION_BACKEND", "")
        fallback = (
            [f"env VLLM_ATTENTION_BACKEND={backend}"] if backend.upper() in FALLBACK_ENV_BACKENDS else []
        )
        return {OFFLOAD: offload, GRAPHS_OFF: off, ATTENTION_FALLBACK: fallback}
