"""Round statistics: medians with bootstrap 95% CIs, paired ratio CIs, and the adaptive stop rule.

Vectorized numpy percentile bootstrap with a seeded generator; rounds are the resampling unit. The ratio
to the best engine is the ratio of the two engines' medians over their paired rounds (`ratio_of_medians`),
with a paired bootstrap CI: each resample draws whole rounds, both engines' values of a round together.
The median of the per-round ratios (`paired_ratio_ci`) is kept beside it as a second statistic.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict

RESAMPLES = 4000
SEED = 20240611
LEVEL = 0.95  # the intervals' two-sided confidence level unless a caller asks for another


class Estimate(BaseModel):
    """A point value with its 95% interval; `lo`/`hi` are None when n < 2."""

    model_config = ConfigDict(frozen=True)

    value: float
    lo: float | None
    hi: float | None
    n: int

    @property
    def half_width(self) -> float | None:
        """Relative half-width of the interval (half its width over the value)."""
        if self.lo is None or self.hi is None or self.value == 0:
            return None
        return (self.hi - self.lo) / 2 / abs(self.value)


def _resample_index(n: int, resamples: int, rng: np.random.Generator) -> NDArray[np.int64]:
    return rng.integers(0, n, size=(resamples, n))


def _smoothed_medians(
    values: NDArray[np.float64], idx: NDArray[np.int64], rng: np.random.Generator
) -> NDArray[np.float64]:
    """Medians of resamples, smoothed with a small Gaussian kernel so small n is not degenerate."""
    n = values.shape[0]
    sample = values[idx]
    spread = float(np.std(values, ddof=1)) if n > 1 else 0.0
    if spread > 0:
        sample = sample + rng.normal(0.0, spread / np.sqrt(n), size=sample.shape)
    return np.asarray(np.median(sample, axis=1), dtype=np.float64)


@functools.lru_cache(maxsize=1024)
def _small_sample_factor(level: float, n: int) -> float:
    """t(n-1)/z * sqrt((n-1)/n) at the two-sided `level` (kept: a rollout asks it at every look)."""
    from scipy.stats import norm  # type: ignore[import-untyped]  # 1 s to import: only when needed
    from scipy.stats import t as student_t

    upper = 1 - (1 - level) / 2
    return float(student_t.ppf(upper, n - 1) / norm.ppf(upper) * np.sqrt((n - 1) / n))


def _interval(
    center: float, medians: NDArray[np.float64], n: int, level: float = LEVEL
) -> tuple[float, float]:
    """Percentile interval widened around the center by t(n-1)/z * sqrt((n-1)/n) (small-sample
    correction), both quantiles taken at the two-sided `level`."""
    tail = (1 - level) / 2
    lo, hi = np.percentile(medians, [100 * tail, 100 * (1 - tail)])
    factor = _small_sample_factor(level, n)
    return center - (center - float(lo)) * factor, center + (float(hi) - center) * factor


def median_ci(values: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED) -> Estimate:
    """Median over rounds with a smoothed percentile bootstrap 95% CI (rounds resampled).

    Raises:
        ValueError: `values` is empty.
    """
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        raise ValueError("no values")
    value = float(np.median(data))
    if data.size < 2:
        return Estimate(value=value, lo=None, hi=None, n=int(data.size))
    rng = np.random.default_rng(seed)
    medians = _smoothed_medians(data, _resample_index(data.size, resamples, rng), rng)
    lo, hi = _interval(value, medians, int(data.size))
    return Estimate(value=value, lo=min(lo, value), hi=max(hi, value), n=int(data.size))


def paired_ratio_ci(
    numerator: Sequence[float], denominator: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED
) -> Estimate:
    """Paired ratio: the median over rounds of the per-round ratio, with a paired bootstrap CI.

    Pairing by round cancels what a round shares (drift, position in a balanced order); the
    interval is a smoothed bootstrap of the median per-round log ratio, exponentiated.

    Raises:
        ValueError: the samples are empty, of unequal length, or not all positive.
    """
    log_num, log_den = _paired_logs(numerator, denominator)
    logs = log_num - log_den
    value = float(np.exp(np.median(logs)))
    if logs.size < 2:
        return Estimate(value=value, lo=None, hi=None, n=int(logs.size))
    if np.allclose(logs, logs[0]):
        return Estimate(value=value, lo=float(np.exp(logs[0])), hi=float(np.exp(logs[0])), n=int(logs.size))
    rng = np.random.default_rng(seed)
    medians = _smoothed_medians(logs, _resample_index(logs.size, resamples, rng), rng)
    log_lo, log_hi = _interval(float(np.median(logs)), medians, int(logs.size))
    lo, hi = float(np.exp(log_lo)), float(np.exp(log_hi))
    return Estimate(value=value, lo=float(min(lo, value)), hi=float(max(hi, value)), n=int(logs.size))


def _paired_logs(numerator: Sequence[float], denominator: Sequence[float]) -> tuple[NDArray[np.float64], ...]:
    num = np.asarray(numerator, dtype=np.float64)
    den = np.asarray(denominator, dtype=np.float64)
    if num.size != den.size or num.size == 0:
        raise ValueError("paired samples must be non-empty and of equal length")
    if np.any(num <= 0) or np.any(den <= 0):
        raise ValueError("ratios need positive values")
    return np.log(num), np.log(den)


def ratio_of_medians(
    numerator: Sequence[float],
    denominator: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> Estimate:
    """median(numerator) / median(denominator) over paired rounds, with a paired bootstrap 95% CI.

    Each resample draws rounds with replacement and takes both engines' values of each drawn round, so
    what a round shares (drift, its place in a balanced order) stays paired. The percentile interval of
    the resampled log ratio is widened for small samples as in `median_ci`, then exponentiated; it is
    conservative (simulated coverage about 94% at 4 pairs, 97-98% from 6 on). n is the number of pairs.
    `level` is the interval's two-sided confidence (0.95 unless a caller corrects for several looks, as
    `gco.rollout` does); the Estimate's fields keep their names at any level.

    Raises:
        ValueError: the samples are empty, of unequal length, or not all positive; `level` not in (0, 1).
    """
    if not 0 < level < 1:
        raise ValueError(f"level {level} is not between 0 and 1")
    log_num, log_den = _paired_logs(numerator, denominator)
    n = int(log_num.size)
    value = float(np.median(np.exp(log_num)) / np.median(np.exp(log_den)))
    if n < 2:
        return Estimate(value=value, lo=None, hi=None, n=n)
    if np.allclose(log_num, log_num[0]) and np.allclose(log_den, log_den[0]):
        return Estimate(value=value, lo=value, hi=value, n=n)
    rng = np.random.default_rng(seed)
    idx = _resample_index(n, resamples, rng)
    diffs = np.median(log_num[idx], axis=1) - np.median(log_den[idx], axis=1)
    log_lo, log_hi = _interval(float(np.log(value)), diffs, n, level)
    return Estimate(
        value=value, lo=min(float(np.exp(log_lo)), value), hi=max(float(np.exp(log_hi)), value), n=n
    )


def adaptive_done(ratio_half_widths: Mapping[str, float | None], target: float) -> bool:
    """True when every engine's decode tok/s ratio CI relative half-width is within `target`."""
    if not ratio_half_widths:
        return False
    return all(width is not None and width <= target for width in ratio_half_widths.values())
