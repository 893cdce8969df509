"""Per-request and per-clip records, and the results of one `bench serve` or `bench clip` call.

Pydantic models; a result is what a rounds cell reads back from `serve/result.json` or `clip/result.json`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gco.evidence.record import RATIO_OF_MEDIANS

Mode = Literal["single", "load", "clip"]
MODES: tuple[Mode, ...] = ("single", "load", "clip")
REQUESTS_FILE = "serve/requests.jsonl"  # per request timings of one `bench serve` call, in its run dir
METRICS_SINGLE = ("ttft_ms", "itl_ms", "e2e_ms", "decode_tps")
METRICS_LOAD = ("n_star", "output_tps", "ttft_ms", "e2e_ms")
METRICS_CLIP = ("e2e_ms", "clips_per_min")
HIGHER_IS_BETTER = {"decode_tps": True, "n_star": True, "output_tps": True, "clips_per_min": True}
DEFINITIONS = {
    "ttft_ms": "time to first token: from sending the request to the first streamed token, client clock",
    "itl_ms": "inter-token latency: mean gap between consecutive streamed tokens of a request",
    "e2e_ms": "end to end: from sending the request (or clip) to its last byte",
    "decode_tps": "decode tokens/s of a request: output tokens after the first over the time after the first",
    "n_star": "capacity N*: the highest concurrency level sustained with every lower level sustained",
    "output_tps": "output tokens/s at N*: completed output tokens over the level's duration",
    "clips_per_min": "60 x successful clips over the seconds spent on every clip of the shape",
}
MEDIAN_OF_PAIRED_RATIOS = "median_of_paired_ratios"
# The metric names of the two ratios to the best engine, after the metric's own name: one name per
# statistic, so a consumer keyed by name gets the contract's ratio of medians under `_ratio_to_best`.
RATIO_TO_BEST = "_ratio_to_best"
PAIRED_RATIO_TO_BEST = "_paired_ratio_to_best"
STATISTICS = {
    "median_over_rounds": "median over rounds of each round's value (per-request medians within a round)",
    RATIO_OF_MEDIANS: "this engine's median over the best engine's median, over the rounds both have; "
    "n = those paired rounds; CI: paired bootstrap (whole rounds resampled)",
    MEDIAN_OF_PAIRED_RATIOS: "median over the paired rounds of this engine's value over the best engine's",
}
UNITS = {
    "ttft_ms": "ms",
    "itl_ms": "ms",
    "e2e_ms": "ms",
    "decode_tps": "tok/s",
    "n_star": "requests",
    "output_tps": "tok/s",
    "clips_per_min": "clips/min",
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
    # The send on the machine's monotonic clock (`time.perf_counter`, CLOCK_MONOTONIC on Linux): lines a
    # request up with a server's own trace taken on the same machine (benchmarks/client_capacity.py).
    sent_clock_s: float | None = None
    ok: bool
    error: str | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_mean_s: float | None = None
    itl_p99_s: float | None = None
    output_tokens: int = 0
    tokens_from: Literal["usage", "chunks", "none"] = "none"
    decode_tps: float | None = None
    # How many reads of the answer were timed by the kernel's receive stamp (`clients.rxstamp`, the
    # arrival of their last byte); 0 where every time is the one the client took after its read.
    kernel_stamps: int = 0


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


class ClipRecord(BaseModel):
    """One clip: a single POST timed whole, from the send to the last byte of the response body."""

    model_config = ConfigDict(extra="forbid")

    index: int
    shape: str
    sent_s: float
    ok: bool
    status: int | None = None
    error: str | None = None
    e2e_s: float
    bytes: int = 0


class ClipResult(BaseModel):
    """Everything one `bench clip` call measured: per shape (and `all`) e2e_ms and clips_per_min."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["clip"] = "clip"
    base_url: str
    clip_digest: str
    clips: int
    failed: int
    shapes: dict[str, dict[str, float]] = Field(default_factory=dict)
    failed_by_shape: dict[str, int] = Field(default_factory=dict)
    warmup_e2e_s: list[float] = Field(default_factory=list)
