"""The start-up lines the fake engine prints: real vLLM 0.11, TGI 2.2 and SGLang lines with its own values.

Each family's lines are copied, in order, from a real log in tests/fixtures/engine_logs (which names its
source) into `fake_logs/<family>.log`, with `${...}` where the fake puts its model, port and the
settings its flags set (tests/unit/bench/test_fake_log.py renders them with the fixture's own values and
finds every line in the fixture). The flags mirror the real engines' own, and each family's module of
`gco.engines` fills its template (`startup_values`, `startup_kept`):

- vLLM: `--enforce-eager` (the config line's `enforce_eager=True`, `cudagraph_mode` 0: CUDAGraphMode.NONE)
  and `--cpu-offload-gb N`, which, as in vLLM 0.9 on, shows only in `non-default args: {...}`.
- SGLang: `--disable-cuda-graph`, `--cpu-offload-gb N`, `--enable-hierarchical-cache` (ServerArgs fields).
- TGI: `--cuda-graphs 0` (`Args { cuda_graphs: Some([0]) }`; the "Using default cuda graphs" line then
  goes, as the launcher logs it only for the default).

The styles are the registered frameworks; one without a template here logs no start-up lines.

What is not modelled: the lines between (weights, KV cache, graph capture), timing, and the settings the
template does not carry. `settings` overrides (`--setting key=value`) replace a setting already in the
family's configuration line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from importlib import resources
from string import Template

from gco import engines
from gco.engines.base import EngineFlags

TEMPLATES = "fake_logs"


def styles() -> tuple[str, ...]:
    """The styles the fake takes: every registered framework."""
    return engines.names()


def template_lines(style: str) -> list[str]:
    """The family's template lines (comment lines dropped); none for a family without a template."""
    template = resources.files("gco.bench").joinpath(TEMPLATES, f"{style}.log")
    if not template.is_file():
        return []
    return [line for line in template.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]


def values(style: str, flags: EngineFlags) -> dict[str, str]:
    """The `${...}` values of a family's template for `flags`."""
    return engines.get(style).startup_values(flags)


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
    if style not in styles():
        raise ValueError(f"unknown style {style!r}")
    framework = engines.get(style)
    lines = [line for line in render(style, values(style, flags)) if framework.startup_kept(line, flags)]
    for key, value in settings.items():
        lines = _override(lines, style, key, value)
    return [*lines, *extra]
