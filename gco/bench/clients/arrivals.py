"""Arrival processes for load mode: constant, Poisson and gamma (burstiness) schedules.

Pure functions of (rate, count, seed); a concurrency level becomes a rate through a reference e2e.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Arrival = Literal["constant", "poisson", "gamma"]


def rate_for_concurrency(concurrency: int, reference_e2e_s: float) -> float:
    """Little's law: the arrival rate that keeps `concurrency` requests in flight on average.

    Raises:
        ValueError: `concurrency` is below 1 or the reference e2e is not positive.
    """
    if concurrency < 1 or reference_e2e_s <= 0:
        raise ValueError("concurrency must be >= 1 and the reference e2e positive")
    return concurrency / reference_e2e_s


def schedule(
    arrival: Arrival, rate: float, count: int, *, burstiness: float = 1.0, seed: int = 0
) -> list[float]:
    """Send offsets in seconds from the start for `count` requests at mean `rate` per second.

    gamma uses shape = burstiness and scale = 1 / (rate * burstiness): burstiness 1 is Poisson,
    below 1 burstier, above 1 more regular. The first request goes at 0.

    Raises:
        ValueError: `rate` or `burstiness` is not positive, or `count` is negative.
    """
    if rate <= 0 or count < 0 or burstiness <= 0:
        raise ValueError("rate and burstiness must be positive, count non-negative")
    if count == 0:
        return []
    if arrival == "constant":
        gaps = np.full(count - 1, 1.0 / rate)
    else:
        rng = np.random.default_rng(seed)
        shape = 1.0 if arrival == "poisson" else burstiness
        gaps = rng.gamma(shape, 1.0 / (rate * shape), size=count - 1)
    return [0.0, *np.cumsum(gaps).tolist()]
