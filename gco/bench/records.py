"""Per-request records and the result of one `bench serve` call (single or load mode).

Pydantic models; the result is what a rounds cell reads back from `serve/result.json`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

METRICS_SINGLE = ("ttft_ms", "itl_ms", "e2e_ms", "decode_tps")
METRICS_LOAD = ("n_star", "output_tps", "ttft_ms", "e2e_ms")
HIGHER_IS_BETTER = {"decode_tps": True, "n_star": True, "output_tps": True}
UNITS = {
    "ttft_ms": "ms",
    "itl_ms": "ms",
    "e2e_ms": "ms",
    "decode_tps": "tok/s",
    "n_star": "requests",
    "output_tps": "tok/s",
}


class RequestRecord(BaseModel):
    """One request's client timings; latencies in seconds from the actual send."""

    model_config = ConfigDict(extra="forbid")

    index: int
    bucket: str
    level: int | None = None
    scheduled_s: float
    sent_s: float
    schedule_lag_s: float
    ok: bool
    error: str | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_mean_s: float | None = None
    itl_p99_s: float | None = None
    output_tokens: int = 0
    tokens_from: Literal["usage", "chunks", "none"] = "none"
    decode_tps: float | None = None


class LevelResult(BaseModel):
    """One load level: the rate offered and what came back."""

    model_config = ConfigDict(extra="forbid")

    concurrency: int
    offered_rate: float
    achieved_rate: float
    completed: int
    failed: int
    output_tps: float
    ttft_ms: float | None
    e2e_ms: float | None
    sustained: bool


class ClientHealth(BaseModel):
    """The client's own schedule delay: whether it, not the server, was the bottleneck."""

    model_config = ConfigDict(extra="forbid")

    lag_p50_ms: float
    lag_p99_ms: float
    lag_max_ms: float
    lagged: bool


class ServeResult(BaseModel):
    """Everything one `bench serve` call measured."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["single", "load"]
    api: Literal["completions", "chat"]
    base_url: str
    model: str
    prompt_digest: str
    requests: int
    failed: int
    buckets: dict[str, dict[str, float]] = Field(default_factory=dict)
    failed_by_bucket: dict[str, int] = Field(default_factory=dict)
    levels: list[LevelResult] = Field(default_factory=list)
    n_star: int | None = None
    at_n_star: dict[str, float] = Field(default_factory=dict)
    reference_e2e_s: float | None = None
    schedule_digest: str | None = None
    warmup_e2e_s: list[float] = Field(default_factory=list)
    client: ClientHealth
