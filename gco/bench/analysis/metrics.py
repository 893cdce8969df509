"""Parse an engine's Prometheus /metrics: counter differences and prefix-cache hit rate between two scrapes.

Parsed with prometheus_client; vLLM (`vllm:prefix_cache_*`) and SGLang-style counter names are read.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel, ConfigDict

HIT_RATE_WARNING = 0.02
QUERY_SUFFIX = ("prefix_cache_queries", "cache_queries")
HIT_SUFFIX = ("prefix_cache_hits", "cache_hits")


class PrefixCache(BaseModel):
    """Prefix-cache queries and hits during the measured window; warn when the rate is not ~0."""

    model_config = ConfigDict(frozen=True)

    queries: float | None
    hits: float | None
    hit_rate: float | None
    warning: bool


def parse_metrics(text: str) -> dict[str, float]:
    """Sum each sample name over its labels (counters keep their `_total` sample name)."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith(("_created", "_bucket")):
                continue
            totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
    return totals


def parse_counters(text: str) -> dict[str, float]:
    """Counter samples (a family typed counter, or a `_total` sample name), each summed over its labels.

    Both are read because exporters differ in which name their TYPE line carries.
    """
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            if family.type == "counter" or sample.name.endswith("_total"):
                totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
    return totals


def counter_deltas(before: str, after: str) -> dict[str, float]:
    """after - before of every counter present in both scrapes: what the measured window added."""
    first, second = parse_counters(before), parse_counters(after)
    return {name: second[name] - first[name] for name in sorted(first.keys() & second.keys())}


def _find(values: Mapping[str, float], suffixes: tuple[str, ...]) -> float | None:
    for name, value in values.items():
        bare = name.split(":")[-1].removesuffix("_total")
        if bare.endswith(suffixes):
            return value
    return None


def prefix_cache(before: Mapping[str, float], after: Mapping[str, float]) -> PrefixCache:
    """Hit rate = delta hits / delta queries between two scrapes; None when the counters are absent."""
    q0, q1 = _find(before, QUERY_SUFFIX), _find(after, QUERY_SUFFIX)
    h0, h1 = _find(before, HIT_SUFFIX), _find(after, HIT_SUFFIX)
    if q0 is None or q1 is None or h0 is None or h1 is None:
        return PrefixCache(queries=None, hits=None, hit_rate=None, warning=False)
    queries, hits = q1 - q0, h1 - h0
    rate = hits / queries if queries > 0 else 0.0
    return PrefixCache(queries=queries, hits=hits, hit_rate=rate, warning=rate > HIT_RATE_WARNING)
