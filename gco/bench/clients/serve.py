"""`bench serve`: an async streaming client timing TTFT, ITL, e2e and decode tok/s, single or load mode.

The client measures its own schedule delay (send time minus planned time) and says when it lagged.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import resource
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from gco.bench.clients.arrivals import Arrival, rate_for_concurrency, schedule
from gco.bench.clients.openloop import OpenLoop
from gco.bench.clients.prompts import Prompt, prompt_digest, salted
from gco.bench.clients.records import ClientHealth, LevelResult, RequestRecord, ServeResult
from gco.bench.clients.timing import NS, Deferred, Timing
from gco.bench.clients.transport import Client, HttpError, Response, Started

LAG_LIMIT_MS = 5.0
SUSTAIN_FRACTION = 0.9
E2E_SLO_FACTOR = 3.0
MEASURED_FIELDS = ("stream", "max_tokens", "model", "prompt", "messages")


class ServeSettings(BaseModel):
    """One `bench serve` call's settings (the identity of what every engine is asked)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str
    mode: Literal["single", "load"] = "single"
    api: Literal["completions", "chat"] = "completions"
    model: str = "default"
    max_tokens: int = 128
    extra_body: dict[str, Any] = Field(default_factory=dict)
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    warmup: int = 2
    timeout_s: float = 600.0
    levels: list[int] = Field(default_factory=lambda: [1, 2, 4, 8])
    rates: list[float] | None = None
    closed_loop: bool = False
    arrival: Arrival = "poisson"
    burstiness: float = 1.0
    requests_per_level: int | None = None
    reference_e2e_s: float | None = None
    seed: int = 0


def overridden_fields(extra_body: Mapping[str, Any]) -> list[str]:
    """The keys of an extra body that replace a field the measurement relies on (they win in `payload`)."""
    return [name for name in MEASURED_FIELDS if name in extra_body]


def payload(settings: ServeSettings, text: str) -> tuple[str, dict[str, Any]]:
    """The path and body of one streaming request; extra body keys go to every engine alike."""
    body: dict[str, Any] = {
        "model": settings.model,
        "max_tokens": settings.max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if settings.api == "chat":
        body["messages"] = [{"role": "user", "content": text}]
        if settings.chat_template_kwargs:
            body["chat_template_kwargs"] = settings.chat_template_kwargs
        path = "/v1/chat/completions"
    else:
        body["prompt"] = text
        path = "/v1/completions"
    body.update(settings.extra_body)
    return path, body


async def send_timed(
    client: Client,
    settings: ServeSettings,
    prompt: Prompt,
    request: bytes,
    scheduled: float,
    origin_ns: int,
    level: int | None = None,
    started: Started | None = None,
) -> Timing:
    """Write one request already encoded (`Target.request`), unless `started` says it was written
    (`Client.start`), and wait for its whole answer; what came back, undecoded. Failures are kept in
    the timing, never raised."""
    begun = started.sent_ns if started is not None else time.perf_counter_ns()
    timing = Timing(prompt.index, prompt.bucket, level, scheduled, origin_ns, begun)
    try:
        async with asyncio.timeout(settings.timeout_s):
            if started is not None:
                timing.response = await client.finish(started)
            else:
                timing.response = await client.exchange(request)
    except (HttpError, TimeoutError) as error:
        timing.error = f"{type(error).__name__}: {error}"[:300]
    return timing


def encoded(client: Client, settings: ServeSettings, text: str) -> bytes:
    """The whole streaming request for `text`, as it goes on the wire."""
    path, body = payload(settings, text)
    return client.target.request("POST", path, json.dumps(body).encode())


async def timed_request(
    client: Client,
    settings: ServeSettings,
    prompt: Prompt,
    text: str,
    scheduled: float,
    origin_ns: int,
    level: int | None = None,
) -> RequestRecord:
    """Send one request, time it and decode it at once; a failure is a record with ok=False."""
    request = encoded(client, settings, text)
    timing = await send_timed(client, settings, prompt, request, scheduled, origin_ns, level)
    return timing.record()


async def warm_up(client: Client, settings: ServeSettings, prompts: Sequence[Prompt]) -> list[RequestRecord]:
    """Salted warm-up requests, one at a time: they never seed the prefix cache for real prompts."""
    origin = time.perf_counter_ns()
    records = []
    for i in range(settings.warmup):
        prompt = prompts[i % len(prompts)]
        records.append(await timed_request(client, settings, prompt, salted(prompt.text), 0.0, origin))
    return records


async def run_single(
    client: Client, settings: ServeSettings, prompts: Sequence[Prompt]
) -> list[RequestRecord]:
    """Each prompt once, one at a time; each decoded after its answer, before the next is sent."""
    origin = time.perf_counter_ns()
    records = []
    for prompt in prompts:
        request = encoded(client, settings, prompt.text)
        scheduled = (time.perf_counter_ns() - origin) / NS
        timing = await send_timed(client, settings, prompt, request, scheduled, origin)
        records.append(timing.record())
    return records


def open_ahead(concurrency: int, count: int) -> int:
    """How many connections a level opens before it starts: its concurrency and a quarter more (the
    answers' times vary), no more than its requests, and within half the process's file limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    budget = soft // 2 if soft != resource.RLIM_INFINITY else count
    return max(0, min(count, concurrency + concurrency // 4 + 1, budget))


def repeat_text(text: str, cycle: int) -> str:
    """A prompt's text on its `cycle`-th reuse: prefixed so that a repeat never hits the prefix cache."""
    return text if cycle == 0 else f"[repeat {cycle}] {text}"


async def run_level(
    client: Client,
    settings: ServeSettings,
    prompts: Sequence[Prompt],
    concurrency: int,
    rate: float,
    first: int = 0,
) -> list[RequestRecord]:
    """Open-loop arrivals at `rate` per second; each request starts at its planned offset.

    Request i uses prompt (first + i) mod len(prompts); reuses are prefixed (see `repeat_text`). The
    requests are sent by `openloop.OpenLoop`: each encoded before the wait for its send time and
    written as the wait ends, on a connection opened before the level (`open_ahead`); the answers
    are decoded after the level.
    """
    count = settings.requests_per_level or len(prompts)
    offsets = schedule(
        settings.arrival, rate, count, burstiness=settings.burstiness, seed=settings.seed + concurrency
    )
    deferred = Deferred()
    await client.pool.open_ahead(open_ahead(concurrency, count))
    timings: list[Timing | None] = [None] * count
    origin = time.perf_counter_ns()

    def request(i: int) -> bytes:
        prompt = prompts[(first + i) % len(prompts)]
        return encoded(client, settings, repeat_text(prompt.text, (first + i) // len(prompts)))

    def finished(i: int, sent_ns: int, response: Response | None, error: str | None) -> None:
        prompt = prompts[(first + i) % len(prompts)]
        timing = Timing(prompt.index, prompt.bucket, concurrency, offsets[i], origin, sent_ns)
        timing.response, timing.error = response, error
        timings[i] = deferred.keep(timing)

    await OpenLoop(client, offsets, request, finished, settings.timeout_s).run(origin)
    return [timing.record() for timing in timings if timing is not None]


async def run_closed(
    client: Client, settings: ServeSettings, prompts: Sequence[Prompt], concurrency: int, first: int = 0
) -> list[RequestRecord]:
    """Closed loop: `concurrency` workers, each sending its next request as soon as the last one ends."""
    count = settings.requests_per_level or len(prompts)
    origin = time.perf_counter_ns()
    indices = iter(range(count))
    timings: list[Timing] = []
    deferred = Deferred()

    async def worker() -> None:
        for i in indices:
            prompt = prompts[(first + i) % len(prompts)]
            request = encoded(client, settings, repeat_text(prompt.text, (first + i) // len(prompts)))
            now = (time.perf_counter_ns() - origin) / NS
            timing = await send_timed(client, settings, prompt, request, now, origin, concurrency)
            timings.append(deferred.keep(timing))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return sorted((timing.record() for timing in timings), key=lambda record: record.sent_s)


async def run_sweep(
    client: Client, settings: ServeSettings, prompts: Sequence[Prompt], reference: float
) -> tuple[list[RequestRecord], list[LevelResult]]:
    """Every load level: open loop at the rate of each concurrency (or each given rate), or closed loop."""
    records: list[RequestRecord] = []
    levels: list[LevelResult] = []
    plan = (
        [(max(1, round(rate * reference)), rate) for rate in settings.rates]
        if settings.rates
        else [(c, rate_for_concurrency(c, reference)) for c in settings.levels]
    )
    for concurrency, rate in plan:
        if settings.closed_loop:
            level_records = await run_closed(client, settings, prompts, concurrency, len(records))
        else:
            level_records = await run_level(client, settings, prompts, concurrency, rate, len(records))
        records += level_records
        levels.append(
            level_result(concurrency, rate, level_records, reference, closed_loop=settings.closed_loop)
        )
    return records, levels


def _median_ms(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.median(present)) * 1000 if present else None


def bucket_stats(records: Sequence[RequestRecord]) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """Per bucket (and `all`): median TTFT, ITL, e2e (ms) and decode tok/s of successful requests."""
    groups: dict[str, list[RequestRecord]] = {"all": list(records)}
    for record in records:
        groups.setdefault(record.bucket, []).append(record)
    stats: dict[str, dict[str, float]] = {}
    failed: dict[str, int] = {}
    for name, group in groups.items():
        ok = [r for r in group if r.ok]
        failed[name] = len(group) - len(ok)
        values = {
            "ttft_ms": _median_ms([r.ttft_s for r in ok]),
            "itl_ms": _median_ms([r.itl_mean_s for r in ok]),
            "e2e_ms": _median_ms([r.e2e_s for r in ok]),
        }
        tps = [r.decode_tps for r in ok if r.decode_tps is not None]
        values["decode_tps"] = float(np.median(tps)) if tps else None
        stats[name] = {k: v for k, v in values.items() if v is not None}
        stats[name]["requests"] = float(len(ok))
    return stats, failed


def level_result(
    concurrency: int,
    rate: float,
    records: Sequence[RequestRecord],
    reference_e2e_s: float,
    *,
    closed_loop: bool = False,
) -> LevelResult:
    """What one load level achieved; sustained when nothing failed, the rate held and e2e stayed in SLO.

    In closed loop there is no offered rate to hold: only failures and the e2e SLO count.
    """
    ok = [r for r in records if r.ok]
    span = max((r.sent_s + (r.e2e_s or 0.0) for r in ok), default=0.0) - min(
        (r.sent_s for r in records), default=0.0
    )
    achieved = len(ok) / span if span > 0 else 0.0
    e2e_ms = _median_ms([r.e2e_s for r in ok])
    offered_span = max((r.scheduled_s for r in records), default=0.0) + reference_e2e_s
    offered = len(records) / offered_span if offered_span > 0 else rate
    sustained = (
        len(ok) == len(records)
        and (closed_loop or achieved >= SUSTAIN_FRACTION * offered)
        and e2e_ms is not None
        and e2e_ms <= E2E_SLO_FACTOR * reference_e2e_s * 1000
    )
    tokens = sum(r.output_tokens for r in ok)
    return LevelResult(
        concurrency=concurrency,
        offered_rate=rate,
        achieved_rate=achieved,
        completed=len(ok),
        failed=len(records) - len(ok),
        output_tps=tokens / span if span > 0 else 0.0,
        ttft_ms=_median_ms([r.ttft_s for r in ok]),
        e2e_ms=e2e_ms,
        sustained=sustained,
    )


def capacity(levels: Sequence[LevelResult]) -> LevelResult | None:
    """N*: the highest level sustained with every lower level sustained too."""
    best = None
    for level in sorted(levels, key=lambda item: item.concurrency):
        if not level.sustained:
            break
        best = level
    return best


def client_health(records: Sequence[RequestRecord]) -> ClientHealth:
    """Schedule delay percentiles; lagged when the p99 delay exceeds LAG_LIMIT_MS."""
    lags = np.asarray([r.schedule_lag_s for r in records] or [0.0]) * 1000
    p99 = float(np.percentile(lags, 99))
    return ClientHealth(
        lag_p50_ms=float(np.median(lags)),
        lag_p99_ms=p99,
        lag_max_ms=float(lags.max()),
        lagged=p99 > LAG_LIMIT_MS,
    )


def schedule_digest(settings: ServeSettings, reference_e2e_s: float | None) -> str:
    """Identity of a load schedule: levels, arrival, burstiness, seed, count and reference e2e."""
    plan = {
        "levels": settings.levels,
        "rates": settings.rates,
        "closed_loop": settings.closed_loop,
        "arrival": settings.arrival,
        "burstiness": settings.burstiness,
        "seed": settings.seed,
        "count": settings.requests_per_level,
        "reference_e2e_s": round(reference_e2e_s, 6) if reference_e2e_s else None,
    }
    return hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()


async def run_serve(
    settings: ServeSettings, prompts: Sequence[Prompt]
) -> tuple[ServeResult, list[RequestRecord]]:
    """Warm up, then run single or load mode; returns the result and every request record."""
    client = Client(settings.base_url)
    try:
        warm = await warm_up(client, settings, prompts)
        warm_e2e = [r.e2e_s for r in warm if r.ok and r.e2e_s is not None]
        if settings.mode == "single":
            records = await run_single(client, settings, prompts)
            levels: list[LevelResult] = []
            reference = None
        else:
            reference = settings.reference_e2e_s or (float(np.median(warm_e2e)) if warm_e2e else None)
            if reference is None:
                probe = await run_single(client, settings, prompts[:1])
                reference = probe[0].e2e_s if probe[0].ok and probe[0].e2e_s else settings.timeout_s
            records, levels = await run_sweep(client, settings, prompts, reference)
    finally:
        client.close()
    buckets, failed = bucket_stats(records)
    star = capacity(levels)
    at_star = (
        {
            "n_star": float(star.concurrency),
            "output_tps": star.output_tps,
            **({"ttft_ms": star.ttft_ms} if star.ttft_ms is not None else {}),
            **({"e2e_ms": star.e2e_ms} if star.e2e_ms is not None else {}),
        }
        if star
        else {}
    )
    result = ServeResult(
        mode=settings.mode,
        api=settings.api,
        base_url=settings.base_url,
        model=settings.model,
        prompt_digest=prompt_digest(prompts),
        requests=len(records),
        failed=sum(not r.ok for r in records),
        buckets=buckets,
        failed_by_bucket=failed,
        levels=levels,
        n_star=star.concurrency if star else None,
        at_n_star=at_star,
        reference_e2e_s=reference,
        schedule_digest=schedule_digest(settings, reference) if settings.mode == "load" else None,
        warmup_e2e_s=warm_e2e,
        client=client_health(records),
    )
    return result, records
