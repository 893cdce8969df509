"""The start-up lines the fake engine prints: real vLLM 0.11, TGI 2.2 and SGLang lines with its own values.

Each family's lines are copied, in order, from a real log in tests/fixtures/engine_logs (which names its
source) into its template (`<family>.log` beside this module), with `${...}` where the fake puts its
model, port and the settings its flags set (tests/unit/bench/test_fake_startup.py renders them with the
fixture's own values and finds every line in the fixture). The flags mirror the real engines' own, and
each family's template (`STARTUP_TEMPLATES`) fills its values and drops the lines its flags remove.

The styles are the registered frameworks; one whose entry copies no log logs no start-up lines.

What is not modelled: the lines between (weights, KV cache, graph capture), timing, and the settings the
template does not carry. `settings` overrides (`--setting key=value`) replace a setting already in the
family's configuration line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from string import Template

from gco import engines
from gco.bench.fake_engine.startup import template_for
from gco.bench.fake_engine.startup.base import EngineFlags


def styles() -> tuple[str, ...]:
    """The styles the fake takes: every registered framework."""
    return engines.names()


def render(style: str, fill: Mapping[str, str]) -> list[str]:
    """The family's template lines with `fill` substituted.

    Raises:
        UnknownFrameworkError: `style` is no registered framework.
        MissingFrameworkEntryError: it has no start-up template (`STARTUP_TEMPLATES`).
    """
    return [Template(line).substitute(fill) for line in template_for(style).lines()]


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
        MissingFrameworkEntryError: the style has no start-up template (`STARTUP_TEMPLATES`).
    """
    if style not in styles():
        raise ValueError(f"unknown style {style!r}")
    template = template_for(style)
    fill = template.values(flags)
    lines = [line for line in render(style, fill) if template.kept(line, flags)]
    for key, value in settings.items():
        lines = _override(lines, style, key, value)
    return [*lines, *extra]
