"""`bench clip`: time whole clips of a video engine, one POST at a time, per shape and overall.

A clip is ok when the engine answers 2xx with a non-empty body; its e2e runs from the send to the last
byte of that body. Clips per minute is 60 x successful clips over the seconds spent on every clip of the
shape (failed ones included): the throughput one client sending clips back to back sees.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from gco.bench.clients.clips import Clip, clip_digest, shapes
from gco.bench.clients.records import ClipRecord, ClipResult
from gco.bench.clients.transport import Client, HttpError

SECONDS_PER_MINUTE = 60.0


class ClipSettings(BaseModel):
    """One `bench clip` call's settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    warmup: int = 1
    timeout_s: float = 600.0


async def timed_clip(client: Client, settings: ClipSettings, clip: Clip, origin: float) -> ClipRecord:
    """Send one clip and time it whole; a failure is a record with ok=False, never an exception."""
    body = json.dumps(clip.body).encode()
    sent = time.perf_counter()
    base = {"index": clip.index, "shape": clip.shape, "sent_s": sent - origin}
    try:
        async with asyncio.timeout(settings.timeout_s):
            status, data = await client.post(clip.path, body)
    except (HttpError, TimeoutError) as error:
        message = f"{type(error).__name__}: {error}"[:300]
        return ClipRecord(**base, ok=False, error=message, e2e_s=time.perf_counter() - sent)
    e2e = time.perf_counter() - sent
    if not 200 <= status < 300:
        answer = f"HTTP {status}: {data[:200].decode('utf-8', 'replace')}"
        return ClipRecord(**base, ok=False, status=status, error=answer, e2e_s=e2e, bytes=len(data))
    if not data:
        return ClipRecord(**base, ok=False, status=status, error="empty body", e2e_s=e2e)
    return ClipRecord(**base, ok=True, status=status, e2e_s=e2e, bytes=len(data))


def warmup_clips(clips: Sequence[Clip], per_shape: int) -> list[Clip]:
    """`per_shape` clips of every distinct shape (cycling through that shape's clips), in shape order."""
    out: list[Clip] = []
    for shape in shapes(clips):
        group = [clip for clip in clips if clip.shape == shape]
        out += [group[i % len(group)] for i in range(per_shape)]
    return out


async def warm_up(client: Client, settings: ClipSettings, clips: Sequence[Clip]) -> list[ClipRecord]:
    """The untimed warm-up: `settings.warmup` clips per distinct shape, one at a time."""
    origin = time.perf_counter()
    return [await timed_clip(client, settings, clip, origin) for clip in warmup_clips(clips, settings.warmup)]


def shape_stats(records: Sequence[ClipRecord]) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """Per shape (and `all`): median e2e (ms) of successful clips, clips per minute, and failures."""
    groups: dict[str, list[ClipRecord]] = {"all": list(records)}
    for record in records:
        groups.setdefault(record.shape, []).append(record)
    stats: dict[str, dict[str, float]] = {}
    failed: dict[str, int] = {}
    for name, group in groups.items():
        ok = [r for r in group if r.ok]
        failed[name] = len(group) - len(ok)
        spent = sum(r.e2e_s for r in group)
        values = {"clips": float(len(ok))}
        if ok:
            values["e2e_ms"] = float(np.median([r.e2e_s for r in ok])) * 1000
        if ok and spent > 0:
            values["clips_per_min"] = SECONDS_PER_MINUTE * len(ok) / spent
        stats[name] = values
    return stats, failed


async def run_clip(settings: ClipSettings, clips: Sequence[Clip]) -> tuple[ClipResult, list[ClipRecord]]:
    """Warm up, then every clip once, one at a time; returns the result and every clip record."""
    client = Client(settings.base_url)
    try:
        warm = await warm_up(client, settings, clips)
        origin = time.perf_counter()
        records = [await timed_clip(client, settings, clip, origin) for clip in clips]
    finally:
        client.close()
    stats, failed = shape_stats(records)
    result = ClipResult(
        base_url=settings.base_url,
        clip_digest=clip_digest(clips),
        clips=len(records),
        failed=sum(not r.ok for r in records),
        shapes=stats,
        failed_by_shape=failed,
        warmup_e2e_s=[r.e2e_s for r in warm if r.ok],
    )
    return result, records
