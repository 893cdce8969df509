"""What the command the harness launched says about the hard gates: its argv and environment are facts.

An engine's log can be silent (vLLM's `with config:` line never prints `cpu_offload_gb`) or only
self-report; the argv and env that `bench rounds` passed are known for certain. Read per engine family:

- vLLM (`vllm serve --help`, docs.vllm.ai "Engine Arguments"): `--cpu-offload-gb N` (N > 0 offloads
  weights to CPU memory); `--kv-offloading-size N` and `--kv-offloading-backend` (KV cache offload,
  0.11 on); `--kv-transfer-config` naming an offloading connector (`OffloadingConnector`, LMCache's
  `LMCacheConnectorV1`); `--enforce-eager`; `-O`/`--compilation-config` with `cudagraph_mode` NONE (0),
  `"use_cudagraph": false`, or a level other than 3 without a mode (the V1 model runner captures graphs
  only at CompilationLevel.PIECEWISE: vllm/v1/worker/gpu_model_runner.py, 0.8-0.10); the
  `VLLM_ATTENTION_BACKEND` environment variable naming a fallback backend (XFORMERS, TORCH_SDPA,
  FLEX_ATTENTION: vllm/envs.py). vLLM's parser accepts `_` for `-` in flag names; both are read.
- SGLang (docs.sglang.ai "Server Arguments"): `--cpu-offload-gb N`, `--enable-hierarchical-cache` (KV
  cache in host memory, HiCache), `--disable-cuda-graph`, `--attention-backend torch_native`.
- TGI (`text-generation-launcher --help`, docs "Text-generation-launcher arguments"): `--cuda-graphs 0`
  or `CUDA_GRAPHS=0` disables CUDA graphs; `ATTENTION=paged` selects the paged (non-flash) kernels.
  The launcher has no CPU-offload option, so a TGI launch never offloads.

A `--config FILE` (vLLM, SGLang) can set any option, so such a launch decides no "off"/"no offload" state.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gco.engines.logsyntax import json_object

Family = str
OFFLOADING_CONNECTORS = ("OffloadingConnector", "LMCacheConnectorV1", "LMCacheConnector")
VLLM_FALLBACK_BACKENDS = ("XFORMERS", "TORCH_SDPA", "FLEX_ATTENTION")
PIECEWISE_LEVEL = 3
CUDAGRAPH_NONE = ("0", "NONE")
CONFIG_FILE_FLAG = "--config"
SHELLS = ("sh", "bash", "dash", "zsh")
FAMILY_MARKERS = (
    ("tgi", re.compile(r"text-generation-launcher|text_generation_server")),
    ("sglang", re.compile(r"\bsglang\b")),
    ("vllm", re.compile(r"\bvllm\b")),
)


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
    """vllm, sglang or tgi when the command names that engine's program or module."""
    text = " ".join(tokens(argv))
    return next((family for family, marker in FAMILY_MARKERS if marker.search(text)), None)


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


def positive(value: str | None) -> bool:
    """A size given as more than zero ("8", "8.0"); any other non-empty value but "None" counts as given."""
    if value is None:
        return False
    try:
        return float(value) > 0
    except ValueError:
        return value.strip() not in ("", "None")


def _compilation_off(value: str) -> bool:
    """A vLLM -O/--compilation-config value that leaves CUDA graphs off."""
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


def _vllm(opts: dict[str, list[str]], env: Mapping[str, str], facts: dict[str, list[str]]) -> None:
    for flag in ("--cpu-offload-gb", "--kv-offloading-size"):
        facts["offload"] += [f"argv {flag} {v}" for v in opts.get(flag, []) if positive(v)]
    facts["offload"] += [f"argv --kv-offloading-backend {v}" for v in opts.get("--kv-offloading-backend", [])]
    for value in opts.get("--kv-transfer-config", []):
        connector = (json_object(value) or {}).get("kv_connector")
        if connector in OFFLOADING_CONNECTORS:
            facts["offload"].append(f"argv --kv-transfer-config kv_connector={connector}")
    if "--enforce-eager" in opts:
        facts["cuda_graphs_off"].append("argv --enforce-eager")
    for flag in ("-O", "--compilation-config"):
        facts["cuda_graphs_off"] += [f"argv {flag} {v}" for v in opts.get(flag, []) if _compilation_off(v)]
    for flag, values in opts.items():  # 0.11's dotted form: -O.cudagraph_mode=NONE
        if (
            flag.replace("_", "-")
            .lower()
            .startswith(("-o.cudagraph-mode", "--compilation-config.cudagraph-mode"))
        ):
            facts["cuda_graphs_off"] += [f"argv {flag}={v}" for v in values if v.upper() in CUDAGRAPH_NONE]
    backend = env.get("VLLM_ATTENTION_BACKEND", "")
    if backend.upper() in VLLM_FALLBACK_BACKENDS:
        facts["attention_fallback"].append(f"env VLLM_ATTENTION_BACKEND={backend}")


def _sglang(opts: dict[str, list[str]], facts: dict[str, list[str]]) -> None:
    facts["offload"] += [
        f"argv --cpu-offload-gb {v}" for v in opts.get("--cpu-offload-gb", []) if positive(v)
    ]
    if "--enable-hierarchical-cache" in opts:
        facts["offload"].append("argv --enable-hierarchical-cache")
    if "--disable-cuda-graph" in opts:
        facts["cuda_graphs_off"].append("argv --disable-cuda-graph")
    if "torch_native" in opts.get("--attention-backend", []):
        facts["attention_fallback"].append("argv --attention-backend torch_native")


def _tgi(opts: dict[str, list[str]], env: Mapping[str, str], facts: dict[str, list[str]]) -> None:
    graphs = opts.get("--cuda-graphs", []) + ([env["CUDA_GRAPHS"]] if "CUDA_GRAPHS" in env else [])
    facts["cuda_graphs_off"] += [f"--cuda-graphs/CUDA_GRAPHS {v}" for v in graphs if v.strip() == "0"]
    if env.get("ATTENTION", "").lower() == "paged":
        facts["attention_fallback"].append("env ATTENTION=paged")


def launch_facts(command: LaunchCommand, family: Family | None) -> LaunchFacts:
    """The gate evidence in `command` read as a launch of `family` (its own hint when None)."""
    family = family or family_hint(command.argv)
    opts = options(command.argv)
    facts: dict[str, list[str]] = {"offload": [], "cuda_graphs_off": [], "attention_fallback": []}
    if family == "vllm":
        _vllm(opts, command.env, facts)
    elif family == "sglang":
        _sglang(opts, facts)
    elif family == "tgi":
        _tgi(opts, command.env, facts)
    decided = family in ("vllm", "sglang", "tgi") and CONFIG_FILE_FLAG not in opts
    return LaunchFacts(**facts, offload_decided=decided)
