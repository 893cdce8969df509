"""One streamed request as measured, and its record: the events are decoded after the timed window.

While a load level runs, a request keeps only what came back (body bytes and the time of each read,
`transport.Response`); JSON is decoded and statistics are computed when the level has ended
(`Deferred`), so that at high rates the client's CPU goes to reading and stamping, and a slow decode
never delays the stamp of another request's token. Past `MAX_HELD_BYTES` of bodies held, requests
are decoded as they end (the memory bound of a very long level).
"""

from __future__ import annotations

import itertools
import json
import statistics
from dataclasses import dataclass
from typing import Any

from gco.bench.clients.http1 import sse_events
from gco.bench.clients.records import RequestRecord
from gco.bench.clients.transport import Response

NS = 1e9
MAX_HELD_BYTES = 512 * 1024 * 1024


def content(event: dict[str, Any]) -> str:
    """The text an OpenAI streaming chunk carries: completions `text`, or chat `delta` content and
    reasoning content (an empty string for the role-only first chat chunk and the usage chunk)."""
    choices = event.get("choices") or []
    if not choices:
        return ""
    choice = choices[0]
    if "text" in choice:
        return str(choice.get("text") or "")
    delta = choice.get("delta") or choice.get("message") or {}
    return str(delta.get("content") or "") + str(delta.get("reasoning_content") or "")


def p99(values: list[float]) -> float:
    """The 99th percentile with linear interpolation between closest ranks (numpy's default method)."""
    ordered = sorted(values)
    rank = 0.99 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class Timing:
    """One request as measured: where it sat in the schedule, when it was written (ns), and what came
    back (or why nothing did). `record()` turns it into a `RequestRecord`, once."""

    index: int
    bucket: str
    level: int | None
    scheduled_s: float
    origin_ns: int
    started_ns: int
    response: Response | None = None
    error: str | None = None
    _record: RequestRecord | None = None

    @property
    def held_bytes(self) -> int:
        return len(self.response.body) if self.response is not None else 0

    def record(self) -> RequestRecord:
        """The request's record: TTFT, ITL, e2e and tokens from its events, or why it failed."""
        if self._record is None:
            self._record = self._decode()
            self.response = None  # the body is no longer needed once decoded
        return self._record

    def _decode(self) -> RequestRecord:
        response = self.response
        sent_ns = response.sent_ns if response is not None else self.started_ns
        sent_s = (sent_ns - self.origin_ns) / NS
        base: dict[str, Any] = {
            "index": self.index,
            "bucket": self.bucket,
            "level": self.level,
            "scheduled_s": self.scheduled_s,
            "sent_s": sent_s,
            "schedule_lag_s": max(0.0, sent_s - self.scheduled_s),
            "sent_clock_s": sent_ns / NS,
        }
        if response is None:
            return RequestRecord(**base, ok=False, error=self.error or "no response")
        if response.status >= 300:
            text = response.body[:200].decode("utf-8", "replace")
            return RequestRecord(**base, ok=False, error=f"HttpError: HTTP {response.status}: {text}"[:300])
        if "text/event-stream" in response.headers.get("content-type", ""):
            events = sse_events(response.body, response.marks)[0]
        else:  # a whole JSON answer (an engine that ignored `stream`): one event, when it ended
            events = [(response.ended_ns, response.body)]
        arrivals: list[int] = []
        usage_tokens: int | None = None
        try:
            for stamp, data in events:
                if data == b"[DONE]":
                    continue
                event = json.loads(data)
                if content(event):
                    arrivals.append(stamp)
                usage = event.get("usage") or {}
                if usage.get("completion_tokens") is not None:
                    usage_tokens = int(usage["completion_tokens"])
        except (ValueError, AttributeError, TypeError) as error:
            return RequestRecord(**base, ok=False, error=f"ValueError: {error}"[:300])
        if not arrivals:
            return RequestRecord(**base, ok=False, error="no output tokens")
        tokens = usage_tokens if usage_tokens is not None else len(arrivals)
        gaps = [(b - a) / NS for a, b in itertools.pairwise(arrivals)]
        decode_s = (response.ended_ns - arrivals[0]) / NS
        return RequestRecord(
            **base,
            ok=True,
            ttft_s=(arrivals[0] - sent_ns) / NS,
            e2e_s=(response.ended_ns - sent_ns) / NS,
            itl_mean_s=statistics.fmean(gaps) if gaps else None,
            itl_p99_s=p99(gaps) if gaps else None,
            output_tokens=tokens,
            tokens_from="usage" if usage_tokens is not None else "chunks",
            decode_tps=(tokens - 1) / decode_s if tokens > 1 and decode_s > 0 else None,
            kernel_stamps=response.kernel_stamps,
        )


class Deferred:
    """Holds measured requests undecoded until the level ends, within `limit` bytes of bodies."""

    def __init__(self, limit: int = MAX_HELD_BYTES) -> None:
        self.limit = limit
        self.held = 0

    def keep(self, timing: Timing) -> Timing:
        """Hold `timing` for later, or decode it now when holding it would pass the limit."""
        if self.held + timing.held_bytes > self.limit:
            timing.record()
        else:
            self.held += timing.held_bytes
        return timing
