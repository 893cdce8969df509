"""Parse an engine's server log, with the command that launched it, for the configuration it actually used.

Status: RESOLVED (a configuration block of the engine's own and every gate and the attention backend
decided), PARTIAL (a block, but something undecided), SELF_REPORTED (only vLLM's own argument dump),
UNPROVEN (none). Hard gates: CUDA graphs on, no attention fallback, no GPU offload (`enginegates`), each
decided from the log's lines and from the launch command (`launchfacts`), whose argv and env are facts.

Formats, from real output (tests/fixtures/engine_logs, each file naming its source):
- vLLM: `Initializing an LLM engine (v0.6.x) with config: k=v, ...` (V0), `Initializing a V1 LLM engine
  (v0.8-0.11) with config: ...`; `args: Namespace(...)` (to 0.8) and `non-default args: {...}` (0.9 on)
  are its argument dumps; attention: `Using Flash Attention backend.` (V0 selector.py), `Using Flash
  Attention backend on V1 engine.`, `Cannot use FlashAttention-2 backend for head size 72.`.
- TGI: `text_generation_launcher: Args { ... }` on one line or pretty-printed over many; attention:
  `Using attention flashinfer - Prefix caching true` (launcher) and `Using Attention = flashinfer` (shard).
- SGLang: `server_args=ServerArgs(...)`; attention: its `attention_backend` field or `Attention backend
  not specified. Use fa3 backend by default.`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gco.bench import enginegates as g
from gco.bench.launchfacts import LaunchCommand, launch_facts
from gco.engines.logsyntax import pairs, python_dict, strip_call
from gco.evidence.redact import REDACTED, redact_text

Status = Literal["RESOLVED", "PARTIAL", "SELF_REPORTED", "UNPROVEN"]
MAX_WARNINGS = 50
MAX_BLOCK_LINES = 400

VLLM_CONFIG = re.compile(
    r"Initializing an? (?:(?P<engine>V[01]) )?LLM engine \((?P<version>[^)]*)\) with config: (?P<body>.*)$"
)
VLLM_NAMESPACE = re.compile(r"\bargs: Namespace\((?P<body>.*)$")
VLLM_NON_DEFAULT = re.compile(r"non-default args: (?P<body>\{.*)$")
SGLANG_CONFIG = re.compile(r"server_args=ServerArgs\((?P<body>.*)$")
TGI_ARGS = re.compile(r"\bArgs \{(?P<body>.*)$")
BACKEND = [
    re.compile(p)
    for p in (
        r"\bUsing (?P<b>[A-Za-z][\w -]*?) backend\b",
        r"\bUsing Attention = (?P<b>[\w-]+)",
        r"\bUsing attention (?P<b>[\w-]+) - Prefix caching",
        r"Attention backend not specified\. Use (?P<b>\w+) backend by default",
    )
]
NOT_ATTENTION = ("Transformers",)  # vLLM's "Using Transformers backend." names the model implementation
FALLBACK_BACKENDS = ("XFormers", "Torch SDPA", "FlexAttention", "paged", "torch_native")
FALLBACK_LINE = re.compile(r"Cannot use FlashAttention", re.IGNORECASE)
UNKNOWN = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"Unknown vLLM environment variable detected: (?P<k>\S+)",
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
    engine: str | None = None
    version: str | None = None
    settings: dict[str, str] = Field(default_factory=dict)
    namespace: dict[str, str] = Field(default_factory=dict)
    non_default: dict[str, str] = Field(default_factory=dict)
    backends: list[str] = Field(default_factory=list)
    fallback_lines: list[str] = Field(default_factory=list)
    unknown: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


def _tgi_block(first: str, rest: Iterable[str]) -> str:
    """The body of TGI's Args block: one line, or the pretty-printed lines up to the closing brace."""
    if first.rstrip().endswith("}"):
        return first.rstrip()[:-1]
    body = [first]
    for count, line in enumerate(rest):
        if line.strip() == "}" or count >= MAX_BLOCK_LINES:
            break
        body.append(line)
    return " ".join(body)


def _config_block(scan: _Scan, line: str, lines: list[str], index: int) -> None:
    """Record the first configuration block of any family that `line` opens."""
    if scan.family is not None:
        return
    if found := VLLM_CONFIG.search(line):
        scan.family, scan.engine, scan.version = "vllm", found["engine"] or "V0", found["version"]
        scan.settings = pairs(found["body"], "=")
    elif found := SGLANG_CONFIG.search(line):
        scan.family, scan.settings = "sglang", pairs(strip_call(found["body"]), "=")
    elif found := TGI_ARGS.search(line):
        scan.family, scan.settings = "tgi", pairs(_tgi_block(found["body"], lines[index + 1 :]), ":")


def _scan(lines: list[str]) -> _Scan:
    scan = _Scan()
    for index, line in enumerate(lines):
        _config_block(scan, line, lines, index)
        if found := VLLM_NAMESPACE.search(line):
            scan.namespace.update(pairs(strip_call(found["body"]), "="))
        if found := VLLM_NON_DEFAULT.search(line):
            scan.non_default.update(python_dict(found["body"]))
        for pattern in BACKEND:
            if (hit := pattern.search(line)) and hit["b"].strip() not in NOT_ATTENTION:
                scan.backends.append(hit["b"].strip())
                break
        if FALLBACK_LINE.search(line):
            scan.fallback_lines.append(warning_text(line)[:200])
        scan.unknown += [hit["k"].strip() for pattern in UNKNOWN if (hit := pattern.search(line))]
        if WARNING.search(line) and len(scan.warnings) < MAX_WARNINGS:
            scan.warnings.append(line.strip()[:300])
    return scan


def _log_gates(scan: _Scan, backend: str | None) -> g.Gates:
    """The gates as the log alone decides them."""
    evidence: dict[str, list[str]] = {}
    graphs: bool | None = None
    offload: bool | None = None
    if scan.family == "vllm" or (scan.family is None and (scan.namespace or scan.non_default)):
        if scan.family:
            graphs, why = g.vllm_graphs(scan.engine, scan.settings)
        else:  # only the self-reported arguments speak: an eager flag says off, nothing says on
            eager = g.truthy({**scan.namespace, **scan.non_default}.get("enforce_eager"))
            graphs, why = (False, "logged args enforce_eager=True") if eager else (None, None)
        if why:
            evidence["cuda graphs"] = [why]
        offload, found = g.vllm_args_offload(scan.namespace, lists_all=True)
        extra, more = g.vllm_args_offload(scan.non_default, lists_all=False)
        offload = True if extra else offload
        if found or more:
            evidence["gpu offload"] = [f"logged args {item}" for item in found + more]
    elif scan.family == "sglang":
        graphs, offload, found = g.sglang_gates(scan.settings)
        if found:
            evidence["gpu offload"] = found
    elif scan.family == "tgi":
        graphs, offload = g.tgi_graphs(scan.settings), False
    fallback = bool(scan.fallback_lines) or backend in FALLBACK_BACKENDS
    if fallback:
        evidence["attention fallback"] = scan.fallback_lines + ([f"backend {backend}"] if backend else [])
    if graphs is False and "cuda graphs" in evidence:
        evidence["cuda graphs off"] = evidence.pop("cuda graphs")
    return g.Gates(cuda_graphs=graphs, gpu_offload=offload, attention_fallback=fallback, evidence=evidence)


def _backend(scan: _Scan) -> str | None:
    logged = scan.settings.get("attention_backend") if scan.family == "sglang" else None
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
    """Read a server log (and the command that started the engine) and decide what configuration it proves."""
    text = [raw.rstrip("\n") for raw in lines]
    scan = _scan(text)
    backend = _backend(scan)
    self_reported = {**scan.namespace, **scan.non_default}
    family = scan.family or ("vllm" if self_reported else None)
    facts = launch_facts(launch, family) if launch is not None else None
    gates = g.combine(_log_gates(scan, backend), facts)
    if scan.family is not None:
        decided = gates.cuda_graphs is not None and gates.gpu_offload is not None and backend is not None
        status: Status = "RESOLVED" if decided else "PARTIAL"
    else:
        status = "SELF_REPORTED" if self_reported else "UNPROVEN"
    return ResolvedConfig(
        family=family,
        engine_version=scan.version,
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
