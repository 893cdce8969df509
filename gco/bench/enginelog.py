"""Parse an engine's server log for the configuration it actually used (vLLM, TGI, SGLang formats).

Status RESOLVED / PARTIAL / SELF_REPORTED / UNPROVEN; gates: CUDA graphs, no attention fallback, no offload.
vLLM's "non-default args" line is what the engine says of itself: it decides the settings only when no
config line does, and its names are kept either way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["RESOLVED", "PARTIAL", "SELF_REPORTED", "UNPROVEN"]
MAX_WARNINGS = 50

VLLM_CONFIG = re.compile(r"with config: (?P<body>.*)$")
VLLM_NON_DEFAULT = re.compile(r"non-default args: \{(?P<body>.*)\}")
SGLANG_CONFIG = re.compile(r"server_args=ServerArgs\((?P<body>.*)\)\s*$")
TGI_CONFIG = re.compile(r"Args \{ (?P<body>.*) \}\s*$")
KEY_EQ = re.compile(r"(\w+)=('[^']*'|\"[^\"]*\"|\[[^\]]*\]|\{[^}]*\}|[^,]*)")
KEY_COLON = re.compile(r"(\w+): (\"[^\"]*\"|Some\([^)]*\)|\[[^\]]*\]|[^,]*)")
QUOTED_KEY = re.compile(r"'(\w+)': ('[^']*'|\[[^\]]*\]|[^,]*)")
BACKEND = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"Using (?P<b>[\w-]+) backend",
        r"Using (?P<b>[\w ]+?) backend on",
        r"Using Attention = (?P<b>[\w-]+)",
        r"attention_backend='(?P<b>[\w-]+)'",
    )
]
FALLBACK = re.compile(
    r"(Cannot use FlashAttention|falling back to|fallback to (the )?\w+ attention|Using XFormers backend"
    r"|Using Torch SDPA backend|attention fallback)",
    re.IGNORECASE,
)
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
TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?Z?|\b\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\b"
)
GATE_KEYS = ("cuda_graphs", "offload")


class ResolvedConfig(BaseModel):
    """What the log proves about the configuration used."""

    model_config = ConfigDict(frozen=True)

    family: str | None = None
    status: Status = "UNPROVEN"
    settings: dict[str, str] = Field(default_factory=dict)
    self_reported: dict[str, str] = Field(default_factory=dict)
    attention_backend: str | None = None
    cuda_graphs: bool | None = None
    attention_fallback: bool = False
    gpu_offload: bool | None = None
    unknown_settings: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @property
    def gate_violations(self) -> list[str]:
        """Hard gates that the log shows broken (an unknown gate is not a violation, it is unresolved)."""
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


def _clean(value: str) -> str:
    return value.strip().strip("'\"")


def _pairs(body: str, pattern: re.Pattern[str]) -> dict[str, str]:
    return {key: _clean(value) for key, value in pattern.findall(body)}


def _truthy(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() in ("true", "1", "yes")


def _gates(family: str, s: dict[str, str]) -> tuple[bool | None, bool | None]:
    """(cuda graphs on, gpu offload) from a family's settings; None when the log does not say."""
    if family == "tgi":
        graphs = s.get("cuda_graphs")
        cuda = None if graphs is None else graphs not in ("Some([0])", "[0]", "Some([])", "[]")
        return cuda, None if "cuda_graphs" not in s else False
    eager = s.get("enforce_eager") if family == "vllm" else s.get("disable_cuda_graph")
    flag = _truthy(eager)
    offload_raw = s.get("cpu_offload_gb")
    try:
        offload = None if offload_raw is None else float(offload_raw) > 0
    except ValueError:
        offload = True
    return (None if flag is None else not flag), offload


def parse_log(lines: Iterable[str]) -> ResolvedConfig:
    """Read a server log and decide what configuration it proves."""
    family: str | None = None
    settings: dict[str, str] = {}
    self_reported: dict[str, str] = {}
    backends: list[str] = []
    fallback = False
    unknown: list[str] = []
    warnings: list[str] = []
    for raw in lines:
        line = raw.rstrip("\n")
        for fam, pattern, pairs in (
            ("vllm", VLLM_CONFIG, KEY_EQ),
            ("sglang", SGLANG_CONFIG, KEY_EQ),
            ("tgi", TGI_CONFIG, KEY_COLON),
        ):
            match = pattern.search(line)
            if match and family is None:
                family, settings = fam, _pairs(match["body"], pairs)
        match = VLLM_NON_DEFAULT.search(line)
        if match:
            self_reported.update(_pairs(match["body"], QUOTED_KEY))
        for pattern in BACKEND:
            found = pattern.search(line)
            if found:
                backends.append(found["b"].strip())
                break
        fallback = fallback or bool(FALLBACK.search(line))
        for pattern in UNKNOWN:
            found = pattern.search(line)
            if found:
                unknown.append(found["k"].strip())
        if WARNING.search(line) and len(warnings) < MAX_WARNINGS:
            warnings.append(line.strip()[:300])
    if family is None and self_reported:
        cuda, offload = _gates("vllm", self_reported)
        return ResolvedConfig(
            family="vllm",
            status="SELF_REPORTED",
            settings=self_reported,
            self_reported=self_reported,
            attention_backend=backends[-1] if backends else None,
            cuda_graphs=cuda,
            attention_fallback=fallback,
            gpu_offload=offload,
            unknown_settings=unknown,
            warnings=warnings,
        )
    if family is None:
        return ResolvedConfig(
            attention_backend=backends[-1] if backends else None,
            attention_fallback=fallback,
            unknown_settings=unknown,
            warnings=warnings,
        )
    cuda, offload = _gates(family, settings)
    status: Status = "RESOLVED" if cuda is not None and offload is not None and backends else "PARTIAL"
    return ResolvedConfig(
        family=family,
        status=status,
        settings=settings,
        self_reported=self_reported,
        attention_backend=backends[-1] if backends else None,
        cuda_graphs=cuda,
        attention_fallback=fallback,
        gpu_offload=offload,
        unknown_settings=unknown,
        warnings=warnings,
    )
