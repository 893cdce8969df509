"""The start-up lines the fake engine prints: real vLLM 0.11, TGI 2.2 and SGLang lines with its own values.

Each family's lines are copied, in order, from a real log in tests/fixtures/engine_logs (which names its
source) into `fake_logs/<family>.log`, with `${...}` where the fake puts its model, port and the
settings its flags set (tests/unit/bench/test_fake_log.py renders them with the fixture's own values and
finds every line in the fixture). The flags mirror the real engines' own:

- vLLM: `--enforce-eager` (the config line's `enforce_eager=True`, `cudagraph_mode` 0: CUDAGraphMode.NONE)
  and `--cpu-offload-gb N`, which, as in vLLM 0.9 on, shows only in `non-default args: {...}`.
- SGLang: `--disable-cuda-graph`, `--cpu-offload-gb N`, `--enable-hierarchical-cache` (ServerArgs fields).
- TGI: `--cuda-graphs 0` (`Args { cuda_graphs: Some([0]) }`; the "Using default cuda graphs" line then
  goes, as the launcher logs it only for the default).

What is not modelled: the lines between (weights, KV cache, graph capture), timing, and the settings the
template does not carry. `settings` overrides (`--setting key=value`) replace a setting already in the
family's configuration line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from string import Template

STYLES = ("vllm", "tgi", "sglang")
TGI_DEFAULT_GRAPHS_LINE = "Using default cuda graphs"


@dataclass(frozen=True)
class EngineFlags:
    """The real-engine flags the fake accepts and shows in its log (a dataclass: the fake engine starts
    once per cell and per local replica, and pydantic's import is most of a start-up)."""

    model: str
    port: int
    enforce_eager: bool = False
    cpu_offload_gb: float = 0.0
    disable_cuda_graph: bool = False
    enable_hierarchical_cache: bool = False
    cuda_graphs: str | None = None


def template_lines(style: str) -> list[str]:
    """The family's template lines (comment lines dropped)."""
    text = resources.files("gco.bench").joinpath("fake_logs", f"{style}.log").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if not line.startswith("#")]


def _non_default(flags: EngineFlags) -> str:
    """vLLM's `non-default args` dict repr for what the fake was given (the model and the port always are)."""
    args: dict[str, object] = {"model_tag": flags.model, "port": flags.port, "model": flags.model}
    if flags.enforce_eager:
        args["enforce_eager"] = True
    if flags.cpu_offload_gb:
        args["cpu_offload_gb"] = flags.cpu_offload_gb
    return repr(args)


def values(style: str, flags: EngineFlags) -> dict[str, str]:
    """The `${...}` values of a family's template for `flags`."""
    if style == "tgi":
        graphs = "None" if flags.cuda_graphs is None else f"Some([{flags.cuda_graphs}])"
        return {"model": flags.model, "port": str(flags.port), "cuda_graphs": graphs}
    if style == "sglang":
        return {
            "model": flags.model,
            "port": str(flags.port),
            "disable_cuda_graph": str(flags.disable_cuda_graph),
            "cpu_offload_gb": f"{flags.cpu_offload_gb:g}",
            "enable_hierarchical_cache": str(flags.enable_hierarchical_cache),
        }
    return {
        "model": flags.model,
        "quantization": "None",
        "enforce_eager": str(flags.enforce_eager),
        "cudagraph_mode": "0" if flags.enforce_eager else "[2,1]",
        "non_default_args": _non_default(flags),
    }


def render(style: str, fill: Mapping[str, str]) -> list[str]:
    """The family's template lines with `fill` substituted."""
    return [Template(line).substitute(fill) for line in template_lines(style)]


def _override(lines: list[str], style: str, key: str, value: str) -> list[str]:
    """Replace setting `key` of the configuration line(s); ValueError when the family's lines have none."""
    pattern = re.compile(rf"(?<=[ (]){re.escape(key)}(?P<sep>: |=)[^,]*")
    out, hit = [], False
    for line in lines:
        new = pattern.sub(lambda m: f"{key}{m['sep']}{value}", line, count=1)
        hit = hit or new != line
        out.append(new)
    if not hit:
        raise ValueError(f"no setting {key!r} in the {style} start-up lines")
    return out


def startup_lines(
    style: str, flags: EngineFlags, settings: Mapping[str, str], extra: Sequence[str]
) -> list[str]:
    """The start-up lines of `style` for `flags`, with `settings` overridden and `extra` lines after.

    Raises:
        ValueError: an unknown style, or a setting the family's configuration line does not carry.
    """
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}")
    lines = render(style, values(style, flags))
    if style == "tgi" and flags.cuda_graphs is not None:
        lines = [line for line in lines if TGI_DEFAULT_GRAPHS_LINE not in line]
    for key, value in settings.items():
        lines = _override(lines, style, key, value)
    return [*lines, *extra]
