"""The load-client benchmark's report (benchmarks/capacity_report.py): every client side by side, and
gco against the best peer of the same run, measure by measure."""

from __future__ import annotations

import pytest

from benchmarks.capacity_report import GCO, against_best_peer, report, table, targets


def error(mean: float, p99: float) -> dict[str, float]:
    return {"ttft_mean_ms": mean, "ttft_p99_ms": p99, "itl_mean_ms": 0.01, "itl_p99_ms": 0.1, "n": 60}


def test_each_measure_is_judged_against_the_best_peer_of_that_measure() -> None:
    rates = {GCO: 700, "aiperf": 64, "guidellm": 32}
    errors = {GCO: error(0.14, 0.9), "aiperf": error(-2.9, 11.1), "guidellm": error(1.91, 0.5)}
    lines = against_best_peer(rates, errors, ["aiperf", "guidellm"])
    assert lines[0] == "against the best peer in this run (aiperf, guidellm): WORSE on at least one"
    assert lines[1] == "  faithful rate: gco 700 req/s vs 64 (aiperf): no worse"
    assert lines[2] == "  TTFT error mean: gco 0.140 ms vs 1.910 ms (guidellm): no worse"  # |-2.9| is larger
    assert lines[3] == "  TTFT error p99: gco 0.900 ms vs 0.500 ms (guidellm): WORSE"


def test_no_peer_in_the_run_says_so_and_a_peer_without_a_rate_is_judged_on_what_it_has() -> None:
    assert against_best_peer({GCO: 700}, {GCO: error(0.1, 0.2)}, ["aiperf"]) == [
        "against the best peer: not measured (no peer ran in this run)"
    ]
    lines = against_best_peer({GCO: 700}, {GCO: error(0.1, 0.2), "aiperf": error(2.0, 9.0)}, ["aiperf"])
    assert lines[0].endswith("no worse on any")
    assert [line.split(":")[0] for line in lines[1:]] == ["  TTFT error mean", "  TTFT error p99"]


def test_the_table_has_a_row_per_client_with_its_ratio_to_each_ceiling() -> None:
    rates = {GCO: 760, "aiperf": 64}
    rows = table(rates, {GCO: error(0.14, 0.26)}, [(800.0, 256), (950.0, 256)], capped=[GCO])
    assert "x ceiling before / x ceiling after" in rows[0]
    assert rows[1].split()[:5] == ["gco", "bench", "serve", "760+", "0.95"]
    assert "1.19" not in rows[1] and "0.80" in rows[1]
    assert rows[2].split()[:4] == ["aiperf", "64", "0.08", "/"]
    assert rows[2].split()[5:7] == ["-", "-"]  # no TTFT error measured for it


def test_the_targets_say_met_or_not() -> None:
    lines = targets({GCO: 760}, {GCO: error(-0.2, 1.2)}, [(800.0, 256), (900.0, 256)])
    assert lines == [
        "ratio gco / server ceiling (before): 0.95 (target >= 0.90: met)",
        "ratio gco / server ceiling (after): 0.84 (target >= 0.90: not met)",
        "TTFT error at concurrency 1: mean 0.200 ms (target <= 0.3: met), "
        "p99 1.200 ms (target <= 1.0: not met)",
    ]


def test_the_whole_report_prints_without_a_ceiling(capsys: pytest.CaptureFixture[str]) -> None:
    report({GCO: 500}, {GCO: error(0.1, 0.2)}, {"guidellm": "no output"}, "", ["guidellm"], "no wrk here")
    out = capsys.readouterr().out
    assert "no wrk here" in out
    assert "guidellm           could not be measured: no output" in out
    assert "against the best peer: not measured" in out
