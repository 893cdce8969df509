"""One metric name per statistic and subject in every bench evidence record (schema version 2)."""

from __future__ import annotations

from gco.bench.clients.records import ClientHealth, ServeResult
from gco.bench.rounds.evidence import AT_N_STAR, serve_record


def test_a_load_run_keeps_its_values_at_n_star_apart_from_every_request() -> None:
    """Bucket `all` and the level N* both have a ttft_ms: they are two subjects, not one name twice."""
    result = ServeResult(
        mode="load",
        api="completions",
        base_url="http://127.0.0.1:1",
        model="m",
        prompt_digest="d" * 64,
        requests=10,
        failed=0,
        buckets={"all": {"ttft_ms": 12.0, "e2e_ms": 80.0, "requests": 10}},
        n_star=4,
        at_n_star={"n_star": 4.0, "output_tps": 50.0, "ttft_ms": 15.0},
        client=ClientHealth(lag_p50_ms=0.1, lag_p99_ms=0.2, lag_max_ms=0.3, lagged=False),
    )
    record = serve_record(result, settings={}, files=[])
    keys = [(m.subject, m.name) for m in record.metrics]
    assert len(keys) == len(set(keys))
    assert ("all", "ttft_ms") in keys and (AT_N_STAR, "ttft_ms") in keys
