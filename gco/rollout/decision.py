"""The rollout's decision rule, pure: the blocks measured so far in, a verdict out.

A block is K requests to each version in a balanced order (`blocks.py`); its value per version and
metric is the median of that version's answered requests in the block. Blocks are the pairing unit of
the bench's paired bootstrap (`gco.bench.analysis.stats.ratio_of_medians`, where rounds are): each
resample draws whole blocks with both versions' values, so what a block shares (the machine's load at
that minute, a drift) cancels in the ratio.

The rule, looked at after every block (`docs/rollout.md`):

- **roll back** as soon as the canary errs significantly more often than the primary (a one-sided
  sign test on the failed requests at `alpha / (2 * max_blocks)` per look: under equal error rates,
  with equal requests per version, each failure is the canary's with probability 1/2), or as soon
  as any headline metric's ratio interval lies wholly above `1 + tolerance` (the canary is slower
  than the tolerance allows);
- **promote** when every headline metric's ratio interval lies wholly below `1 + tolerance` (the
  canary is at most that much slower, and may be faster) and the canary has not failed more requests
  than the primary;
- **inconclusive** at `max_blocks` without either: rolled back, and named so;
- **continue** otherwise.

Looking after every block is optional stopping: a 95% interval looked at 17 times crosses a bound
more often than 5% of the time. Each look's interval is therefore taken at level `1 - alpha / looks`
(Bonferroni over the most looks a rollout can take), so the chance that any look errs, on either
side, is at most `alpha`; each wrong decision (a slower build promoted, an equal one rolled back) is
on one side of it, at most `alpha / 2`. `benchmarks/rollout_decisions.py` measures it.
"""

# No `from __future__ import annotations` with pydantic models (gco/reconcile/proxy/routes.py says why).

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gco.bench.analysis.stats import Estimate, ratio_of_medians

Verdict = Literal["continue", "promote", "rollback", "inconclusive"]
FINAL_VERDICTS: tuple[Verdict, ...] = ("promote", "rollback", "inconclusive")
# The headline metrics, each lower-is-better: time to the first token and the whole answer's time.
METRICS = ("ttft_ms", "latency_ms")
RESAMPLES = 2000  # per look: the interval's tails at level 1 - 0.05/17 hold about 3 resamples each side


class Rule(BaseModel):
    """The decision rule's settings (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tolerance: float = Field(default=0.05, gt=0, lt=1)
    # At least min_blocks (`_looks`, which names the real minimum): a bound of its own here would name
    # another.
    max_blocks: int = Field(default=20, ge=1, le=200)
    min_blocks: int = Field(
        default=4, ge=2, le=200
    )  # the first look: fewer pairs give no interval worth reading
    alpha: float = Field(default=0.05, gt=0, lt=1)
    resamples: int = Field(default=RESAMPLES, ge=100, le=100_000)

    @model_validator(mode="after")
    def _looks(self) -> "Rule":
        if self.min_blocks > self.max_blocks:
            first = f"min_blocks ({self.min_blocks}, the first look)"
            raise ValueError(f"max_blocks ({self.max_blocks}) must be at least {first}")
        return self

    @property
    def looks(self) -> int:
        """The most looks a rollout takes at the latency intervals: one after each block from min_blocks."""
        return self.max_blocks - self.min_blocks + 1

    @property
    def level(self) -> float:
        """Each look's two-sided interval level: Bonferroni over every look."""
        return 1 - self.alpha / self.looks

    @property
    def bound(self) -> float:
        """The largest canary/primary ratio the tolerance admits."""
        return 1 + self.tolerance


class VersionBlock(BaseModel):
    """One version's part of one block: its answered requests' medians, its requests and failures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests: int = Field(ge=0)
    errors: int = Field(ge=0)
    ttft_ms: float | None = Field(default=None, gt=0)
    latency_ms: float | None = Field(default=None, gt=0)

    def value(self, metric: str) -> float | None:
        return self.ttft_ms if metric == "ttft_ms" else self.latency_ms


class Block(BaseModel):
    """One block: both versions measured in the same balanced order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    primary: VersionBlock
    canary: VersionBlock


class Decision(BaseModel):
    """What the rule says after a look, with what it read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    verdict: Verdict
    reason: str
    blocks: int
    ratios: dict[str, Estimate] = Field(default_factory=dict)
    canary_errors: int = 0
    primary_errors: int = 0
    error_p: float | None = None  # the sign test's one-sided p-value, when the canary failed more


def sign_test_p(canary: int, primary: int) -> float:
    """P(at least `canary` of the `canary + primary` failures fall on the canary) when each falls on
    either version with probability 1/2 (equal error rates, equal requests per version)."""
    from scipy.stats import binom  # type: ignore[import-untyped]  # 1 s to import: only when needed

    total = canary + primary
    return 1.0 if total == 0 else float(binom.sf(canary - 1, total, 0.5))


def pairs(blocks: Sequence[Block], metric: str) -> tuple[list[float], list[float]]:
    """(canary values, primary values) of `metric` over the blocks where both versions answered."""
    canary: list[float] = []
    primary: list[float] = []
    for block in blocks:
        mine, theirs = block.canary.value(metric), block.primary.value(metric)
        if mine is not None and theirs is not None:
            canary.append(mine)
            primary.append(theirs)
    return canary, primary


def ratios(blocks: Sequence[Block], rule: Rule, seed: int) -> dict[str, Estimate]:
    """Each headline metric's canary/primary ratio of medians over the blocks where both answered, with
    the paired bootstrap interval at the rule's per-look level (metrics with fewer than 2 pairs left out)."""
    found: dict[str, Estimate] = {}
    for metric in METRICS:
        canary, primary = pairs(blocks, metric)
        if len(canary) >= 2:
            found[metric] = ratio_of_medians(
                canary, primary, resamples=rule.resamples, seed=seed, level=rule.level
            )
    return found


def decide(blocks: Sequence[Block], rule: Rule, *, seed: int = 0) -> Decision:
    """The verdict after `blocks` (module docstring). Pure: the bootstrap draws from `seed`.

    Parameters:
        blocks: every block measured so far, in order.
        rule: the tolerance, the most and fewest blocks, alpha.
        seed: the bootstrap's seed (a rollout passes one per look, so a look can be recomputed).
    """
    count = len(blocks)
    canary_errors = sum(block.canary.errors for block in blocks)
    primary_errors = sum(block.primary.errors for block in blocks)
    base = {"blocks": count, "canary_errors": canary_errors, "primary_errors": primary_errors}
    error_p = sign_test_p(canary_errors, primary_errors) if canary_errors > primary_errors else None
    # Errors are looked at after every block, the first included: Bonferroni over max_blocks looks, with
    # half of alpha (the latency intervals' lower side spends the other half on rolling back).
    if error_p is not None and error_p <= rule.alpha / (2 * rule.max_blocks):
        reason = f"the canary failed {canary_errors} requests, the primary {primary_errors} (p={error_p:.2g})"
        return Decision(verdict="rollback", reason=reason, error_p=error_p, **base)
    if count < rule.min_blocks:
        return Decision(verdict="continue", reason=f"{count} of at least {rule.min_blocks} blocks", **base)
    found = ratios(blocks, rule, seed)
    slower = {m: e for m, e in found.items() if e.lo is not None and e.lo > rule.bound}
    if slower:
        metric, estimate = next(iter(slower.items()))
        reason = f"{metric} ratio {_ci(estimate)} lies above {rule.bound:g}"
        return Decision(verdict="rollback", reason=reason, ratios=found, error_p=error_p, **base)
    within = len(found) == len(METRICS) and all(
        e.hi is not None and e.hi <= rule.bound for e in found.values()
    )
    if within and canary_errors <= primary_errors:
        shown = ", ".join(f"{m} {_ci(e)}" for m, e in found.items())
        reason = f"every ratio within {rule.bound:g}: {shown}"
        return Decision(verdict="promote", reason=reason, ratios=found, **base)
    if count >= rule.max_blocks:
        reason = f"no verdict after {count} blocks (the intervals straddle {rule.bound:g}, or errors)"
        return Decision(verdict="inconclusive", reason=reason, ratios=found, error_p=error_p, **base)
    return Decision(verdict="continue", reason="the intervals straddle the bound", ratios=found, **base)


def _ci(estimate: Estimate) -> str:
    return f"{estimate.value:.3f} [{estimate.lo or 0:.3f}, {estimate.hi or 0:.3f}]"
