"""Arrival schedules: constant spacing, Poisson and gamma rates, burstiness, concurrency to rate."""

from __future__ import annotations

import numpy as np
import pytest

from gco.bench.clients.arrivals import Arrival, rate_for_concurrency, schedule


def test_constant_schedule_is_evenly_spaced() -> None:
    offsets = schedule("constant", 4.0, 5)
    assert offsets == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])
    assert schedule("constant", 1.0, 0) == []


@pytest.mark.parametrize(("arrival", "burstiness"), [("poisson", 1.0), ("gamma", 0.25), ("gamma", 4.0)])
def test_random_schedules_hold_the_mean_rate(arrival: Arrival, burstiness: float) -> None:
    offsets = np.asarray(schedule(arrival, 50.0, 20001, burstiness=burstiness, seed=3))
    gaps = np.diff(offsets)
    assert 1 / gaps.mean() == pytest.approx(50.0, rel=0.05)
    cv = gaps.std() / gaps.mean()
    expected = 1.0 if arrival == "poisson" else 1 / np.sqrt(burstiness)
    assert cv == pytest.approx(expected, rel=0.1)


def test_same_seed_same_schedule() -> None:
    assert schedule("poisson", 3.0, 10, seed=1) == schedule("poisson", 3.0, 10, seed=1)
    assert schedule("poisson", 3.0, 10, seed=1) != schedule("poisson", 3.0, 10, seed=2)


def test_concurrency_becomes_a_rate_by_littles_law() -> None:
    assert rate_for_concurrency(8, 2.0) == 4.0
    with pytest.raises(ValueError, match="concurrency"):
        rate_for_concurrency(0, 1.0)
    with pytest.raises(ValueError, match="positive"):
        schedule("poisson", 0.0, 3)
