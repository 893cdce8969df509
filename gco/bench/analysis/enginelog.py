"""Parse an engine's server log, with the command that launched it, for the configuration it actually used.

Status: RESOLVED (a configuration block of the engine's own and every gate and the attention backend
decided), PARTIAL (a block, but something undecided), SELF_REPORTED (only the engine's own argument
dump, as vLLM logs), UNPROVEN (none). Hard gates: CUDA graphs on, no attention fallback, no GPU offload
(`enginegates`), each decided from the log's lines and from the launch command (`launchfacts`), whose
argv and env are facts.

The formats are each engine family's (`logrules`, found by framework name: its configuration block,
argument dumps, attention backend lines and the settings it says it does not know, from real output in
tests/fixtures/engine_logs, each file naming its source); every registered family's lines are looked
for in every log, and the first configuration block names the family. Besides, argparse's
`unrecognized arguments` and the like name an unknown setting in any engine's log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gco.bench.analysis import enginegates as g
from gco.bench.analysis import logrules
from gco.bench.analysis.launchfacts import LaunchCommand, launch_facts
from gco.bench.analysis.logrules.base import ArgumentDump, ConfigBlock
from gco.evidence.redact import REDACTED, redact_text

Status = Literal["RESOLVED", "PARTIAL", "SELF_REPORTED", "UNPROVEN"]
MAX_WARNINGS = 50
UNKNOWN = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"unrecognized arguments?: (?P<k>.+)$",
        r"unknown (?:setting|argument|option)s?[:=]? '?(?P<k>[\w.-]+)'?",
        r"(?P<k>\S+) is not a recognized (?:setting|argument)",
    )
]
WARNING = re.compile(r"\b(WARNING|WARN)\b")
SECRET_KEY = re.compile(r"(^|_)(api_key|secret|password|authtoken|token)$", re.IGNORECASE)
TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?Z?|\b\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\b"
)


class ResolvedConfig(BaseModel):
    """What the log and the launch command prove about the configuration used."""

    model_config = ConfigDict(frozen=True)

    family: str | None = None
    engine_version: str | None = None
    status: Status = "UNPROVEN"
    settings: dict[str, str] = Field(default_factory=dict)
    self_reported: dict[str, str] = Field(default_factory=dict)
    attention_backend: str | None = None
    cuda_graphs: bool | None = None
    attention_fallback: bool = False
    gpu_offload: bool | None = None
    gate_evidence: dict[str, list[str]] = Field(default_factory=dict)
    unknown_settings: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @property
    def gate_violations(self) -> list[str]:
        """Hard gates broken (an undecided gate is not a violation: it leaves the status unresolved)."""
        broken = []
        if self.cuda_graphs is False:
            broken.append("cuda graphs off")
        if self.attention_fallback:
            broken.append("attention fallback")
        if self.gpu_offload:
            broken.append("gpu offload")
        return broken


def warning_text(line: str) -> str:
    """A warning line without its timestamps, so the same warning in every round reads as one."""
    return " ".join(TIMESTAMP.sub("", line).split())


class _Scan(BaseModel):
    """What one pass over the lines found."""

    family: str | None = None
    block: ConfigBlock | None = None
    dumps: list[tuple[str, ArgumentDump]] = Field(default_factory=list)
    backends: list[str] = Field(default_factory=list)
    fallback_lines: list[str] = Field(default_factory=list)
    unknown: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @property
    def settings(self) -> dict[str, str]:
        return self.block.settings if self.block is not None else {}

    @property
    def self_reported(self) -> dict[str, str]:
        """Every argument dump's values, later ones over earlier ones."""
        return {key: value for _, dump in self.dumps for key, value in dump.values.items()}


def _config_block(scan: _Scan, line: str, lines: list[str], index: int) -> None:
    """Record the first configuration block of any family that `line` opens."""
    if scan.family is not None:
        return
    for name, rules in logrules.registered():
        if (block := rules.config_block(line, lines[index + 1 :])) is not None:
            scan.family, scan.block = name, block
            return


def _line_facts(scan: _Scan, line: str) -> None:
    """Argument dumps, the attention backend, fallback and unknown-setting lines of any family."""
    families = logrules.registered()
    for name, rules in families:
        if (dump := rules.argument_dump(line)) is not None:
            scan.dumps.append((name, dump))
    backend_lines = [p for _, rules in families for p in rules.backend_lines]
    for pattern in backend_lines:
        if hit := pattern.search(line):
            scan.backends.append(hit["b"].strip())
            break
    if any(p.search(line) for _, rules in families for p in rules.fallback_lines):
        scan.fallback_lines.append(warning_text(line)[:200])
    unknown = [p for _, rules in families for p in rules.unknown_lines] + UNKNOWN
    scan.unknown += [hit["k"].strip() for pattern in unknown if (hit := pattern.search(line))]


def _scan(lines: list[str]) -> _Scan:
    scan = _Scan()
    for index, line in enumerate(lines):
        _config_block(scan, line, lines, index)
        _line_facts(scan, line)
        if WARNING.search(line) and len(scan.warnings) < MAX_WARNINGS:
            scan.warnings.append(line.strip()[:300])
    return scan


def _speaker(scan: _Scan) -> str | None:
    """The family whose logged configuration speaks: the block's, else the first argument dump's."""
    return scan.family or next((family for family, _ in scan.dumps), None)


def _log_gates(scan: _Scan, backend: str | None) -> g.Gates:
    """The gates as the log alone decides them."""
    speaker = _speaker(scan)
    found = (
        logrules.rules_for(speaker).log_gates(scan.block, [d for f, d in scan.dumps if f == speaker])
        if speaker
        else None
    )
    graphs = found.cuda_graphs if found else None
    offload = found.gpu_offload if found else None
    evidence = {key: list(values) for key, values in found.evidence.items()} if found else {}
    fallbacks = {name for _, rules in logrules.registered() for name in rules.fallback_backends}
    fallback = bool(scan.fallback_lines) or backend in fallbacks
    if fallback:
        evidence["attention fallback"] = scan.fallback_lines + ([f"backend {backend}"] if backend else [])
    if graphs is False and "cuda graphs" in evidence:
        evidence["cuda graphs off"] = evidence.pop("cuda graphs")
    return g.Gates(cuda_graphs=graphs, gpu_offload=offload, attention_fallback=fallback, evidence=evidence)


def _backend(scan: _Scan) -> str | None:
    setting = logrules.rules_for(scan.family).backend_setting if scan.family else None
    logged = scan.settings.get(setting) if setting else None
    if logged and logged != "None":
        return logged
    return scan.backends[-1] if scan.backends else None


def _redacted(settings: dict[str, str]) -> dict[str, str]:
    """Settings with secrets hidden: a key naming one (`api_key`, TGI's `ngrok_authtoken`; not `tokenizer`
    or `max_total_tokens`) that has a value, and token-shaped text anywhere."""
    return {
        key: REDACTED if SECRET_KEY.search(key) and value not in ("None", "") else redact_text(value)
        for key, value in settings.items()
    }


def parse_log(lines: Iterable[str], launch: LaunchCommand | None = None) -> ResolvedConfig:
    """Read a server log (and the command that started the engine) and decide what configuration it proves.

    Raises:
        MissingFrameworkEntryError: a registered framework has no log rules (`logrules.LOG_RULES`).
    """
    text = [raw.rstrip("\n") for raw in lines]
    scan = _scan(text)
    backend = _backend(scan)
    self_reported = scan.self_reported
    family = _speaker(scan)
    facts = launch_facts(launch, family) if launch is not None else None
    gates = g.combine(_log_gates(scan, backend), facts)
    if scan.family is not None:
        decided = gates.cuda_graphs is not None and gates.gpu_offload is not None and backend is not None
        status: Status = "RESOLVED" if decided else "PARTIAL"
    else:
        status = "SELF_REPORTED" if self_reported else "UNPROVEN"
    return ResolvedConfig(
        family=family,
        engine_version=scan.block.version if scan.block is not None else None,
        status=status,
        settings=_redacted(scan.settings or self_reported),
        self_reported=_redacted(self_reported),
        attention_backend=backend,
        cuda_graphs=gates.cuda_graphs,
        attention_fallback=gates.attention_fallback,
        gpu_offload=gates.gpu_offload,
        gate_evidence=gates.evidence,
        unknown_settings=scan.unknown,
        warnings=scan.warnings,
    )
