"""Prometheus scraping: counters summed over labels, prefix-cache hit rate between two scrapes."""

from __future__ import annotations

from gco.bench.analysis.metrics import counter_deltas, parse_metrics, prefix_cache

TEXT = """# HELP vllm:prefix_cache_queries q
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{{model_name="m",engine="0"}} {q}
vllm:prefix_cache_queries_total{{model_name="m",engine="1"}} {q}
# HELP vllm:prefix_cache_hits h
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{{model_name="m",engine="0"}} {h}
# HELP vllm:num_requests_running r
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} 2
"""


def test_hit_rate_from_counter_deltas() -> None:
    before = parse_metrics(TEXT.format(q=100, h=10))
    after = parse_metrics(TEXT.format(q=150, h=10))
    assert before["vllm:prefix_cache_queries_total"] == 200
    assert before["vllm:num_requests_running"] == 2
    cache = prefix_cache(before, after)
    assert (cache.queries, cache.hits, cache.hit_rate, cache.warning) == (100, 0, 0.0, False)


def test_warm_cache_warns() -> None:
    cache = prefix_cache(parse_metrics(TEXT.format(q=0, h=0)), parse_metrics(TEXT.format(q=50, h=40)))
    assert cache.hit_rate == 0.4
    assert cache.warning


def test_absent_counters_are_not_measured() -> None:
    cache = prefix_cache({}, parse_metrics(TEXT.format(q=1, h=1)))
    assert cache.hit_rate is None
    assert not cache.warning
    idle = prefix_cache(parse_metrics(TEXT.format(q=5, h=0)), parse_metrics(TEXT.format(q=5, h=0)))
    assert idle.hit_rate == 0.0


def test_counter_deltas_read_either_type_line_and_skip_gauges() -> None:
    real = (
        "# HELP vllm:request_success_total ok\n# TYPE vllm:request_success_total counter\n"
        'vllm:request_success_total{{finished_reason="stop"}} {n}\n'
        'vllm:request_success_total{{finished_reason="length"}} 1\n'
    )
    before = TEXT.format(q=10, h=0) + real.format(n=3)
    after = TEXT.format(q=30, h=1) + real.format(n=7)
    assert counter_deltas(before, after) == {
        "vllm:prefix_cache_hits_total": 1.0,
        "vllm:prefix_cache_queries_total": 40.0,
        "vllm:request_success_total": 4.0,
    }
    assert counter_deltas(before, "") == {}
