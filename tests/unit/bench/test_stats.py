"""Bootstrap CIs on seeded synthetic data: coverage of the true ratio, and drift bias under two orders."""

from __future__ import annotations

import numpy as np
import pytest

from gco.bench.analysis.stats import Estimate, adaptive_done, median_ci, paired_ratio_ci, ratio_of_medians
from gco.bench.rounds.williams import williams_sequences
from tests.conftest import soak_enabled


@pytest.mark.parametrize("rounds", [6, 8])
def test_paired_ratio_ci_covers_the_true_ratio_about_95_percent(rounds: int) -> None:
    rng = np.random.default_rng(7)
    sims = 1200
    truth = 0.75
    hits = 0
    for sim in range(sims):
        round_effect = rng.normal(0, 0.05, rounds)
        a = 100 * truth * np.exp(round_effect + rng.normal(0, 0.04, rounds))
        b = 100 * np.exp(round_effect + rng.normal(0, 0.04, rounds))
        ci = paired_ratio_ci(a.tolist(), b.tolist(), resamples=1000, seed=sim)
        assert ci.lo is not None
        assert ci.hi is not None
        hits += ci.lo <= truth <= ci.hi
    assert 0.93 <= hits / sims <= 0.97


@pytest.mark.parametrize("rounds", [4, 8])
def test_ratio_of_medians_ci_covers_the_true_ratio_at_least_95_percent(rounds: int) -> None:
    """The contract's ratio: medians over paired rounds, paired bootstrap (conservative by design)."""
    rng = np.random.default_rng(5)
    sims = 600
    truth = 0.75
    hits = 0
    for sim in range(sims):
        round_effect = rng.normal(0, 0.05, rounds)
        a = 100 * truth * np.exp(round_effect + rng.normal(0, 0.04, rounds))
        b = 100 * np.exp(round_effect + rng.normal(0, 0.04, rounds))
        ci = ratio_of_medians(a.tolist(), b.tolist(), resamples=1000, seed=sim)
        assert ci.lo is not None and ci.hi is not None and ci.n == rounds
        hits += ci.lo <= truth <= ci.hi
    assert 0.92 <= hits / sims <= 0.99


def test_ratio_of_medians_is_not_the_median_of_ratios() -> None:
    mine, best = [10.0, 30.0, 20.0], [20.0, 20.0, 80.0]
    assert ratio_of_medians(mine, best).value == pytest.approx(20.0 / 20.0)
    assert paired_ratio_ci(mine, best).value == pytest.approx(0.5)
    exact = ratio_of_medians([2.0, 2.0], [1.0, 1.0])
    assert (exact.value, exact.lo, exact.hi, exact.n) == (2.0, 2.0, 2.0, 2)
    assert ratio_of_medians([3.0], [1.0]).lo is None
    with pytest.raises(ValueError, match="equal length"):
        ratio_of_medians([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        ratio_of_medians([0.0, 1.0], [1.0, 1.0])


def _simulate(order: list[list[int]], rounds: int, drift: float, rng: np.random.Generator) -> float:
    """Ratio estimate of engine 1 over engine 0 (truth 0.8) when throughput decays linearly in time."""
    truth = np.array([100.0, 80.0, 90.0])
    values: dict[int, list[float]] = {0: [], 1: [], 2: []}
    t = 0
    for r in range(rounds):
        for engine in order[r % len(order)]:
            values[engine].append(truth[engine] * (1 - drift * t) * np.exp(rng.normal(0, 0.005)))
            t += 1
    return paired_ratio_ci(values[1], values[0], resamples=200).value


def test_williams_order_removes_the_drift_bias_a_fixed_order_shows() -> None:
    rng = np.random.default_rng(11)
    fixed = [[0, 1, 2]]
    williams = williams_sequences(3)
    fixed_bias = np.mean([_simulate(fixed, 6, 0.01, rng) for _ in range(60)]) - 0.8
    williams_bias = np.mean([_simulate(williams, 6, 0.01, rng) for _ in range(60)]) - 0.8
    assert abs(fixed_bias) > 0.005
    assert abs(williams_bias) < abs(fixed_bias) / 3


def test_median_ci_contains_the_median_and_degrades_gracefully() -> None:
    estimate = median_ci([10.0, 11.0, 12.0, 13.0, 14.0])
    assert estimate.value == 12.0
    assert estimate.lo is not None
    assert estimate.hi is not None
    assert estimate.lo <= 12.0 <= estimate.hi
    single = median_ci([5.0])
    assert (single.lo, single.hi, single.n) == (None, None, 1)
    assert single.half_width is None
    with pytest.raises(ValueError, match="no values"):
        median_ci([])


def test_paired_ratio_edge_cases() -> None:
    exact = paired_ratio_ci([2.0, 4.0], [1.0, 2.0])
    assert (exact.value, exact.lo, exact.hi) == (2.0, 2.0, 2.0)
    assert paired_ratio_ci([3.0], [1.0]).lo is None
    with pytest.raises(ValueError, match="equal length"):
        paired_ratio_ci([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        paired_ratio_ci([0.0, 1.0], [1.0, 1.0])


def test_adaptive_rule_needs_every_width_within_target() -> None:
    assert Estimate(value=2.0, lo=1.9, hi=2.1, n=4).half_width == pytest.approx(0.05)
    assert adaptive_done({"a": 0.01, "b": 0.02}, 0.03)
    assert not adaptive_done({"a": 0.01, "b": 0.05}, 0.03)
    assert not adaptive_done({"a": None}, 0.03)
    assert not adaptive_done({}, 0.03)


@pytest.mark.soak
@pytest.mark.skipif(not soak_enabled(), reason="long coverage simulation: set GCO_SOAK=1")
@pytest.mark.parametrize("rounds", [4, 10, 12])
def test_soak_ratio_coverage_across_round_counts(rounds: int) -> None:
    rng = np.random.default_rng(23)
    sims = 5000
    hits = 0
    for sim in range(sims):
        shared = rng.normal(0, 0.05, rounds)
        a = 50 * np.exp(shared + rng.normal(0, 0.06, rounds))
        b = 100 * np.exp(shared + rng.normal(0, 0.06, rounds))
        ci = paired_ratio_ci(a.tolist(), b.tolist(), resamples=2000, seed=sim)
        hits += ci.lo is not None and ci.hi is not None and ci.lo <= 0.5 <= ci.hi
    assert 0.92 <= hits / sims <= 0.975
