"""How often a rollout decides wrongly, and how soon it decides: the paired rule against a raw threshold.

A simulation, CPU only: each trial is one Region's analysis of a canary whose true speed ratio to the
primary is known, with requests drawn under one of the noise shapes the bench's own tests simulate
(`tests/unit/bench/test_stats.py`: per-request log-normal noise, effects a round (here a block)
shares, a linear drift of the machine; the fake engine's `--noise` and `--drift` are the same
shapes), plus heavy tails (a few requests three times slower, as a noisy neighbour makes them). Both
versions' requests are drawn in the rollout's ABBA order, K per version per block, and each rule reads
the same blocks:

- **paired**: `gco.rollout.decision.decide` (the bench's paired bootstrap over blocks, each look at
  level 1 - alpha/looks, `docs/rollout.md`);
- **threshold** (the baseline): what canary tools do (Flagger's analysis: a metric check per interval
  against a threshold, rolled back after `threshold` failed checks, promoted after its iterations,
  https://docs.flagger.app/usage/metrics): after each block, the block's raw mean latency of the
  canary over the primary's is checked against 1 + tolerance; 2 failed checks roll back, 10 blocks
  without them promote.

Truths: an equal build (1.00: rolling it back is wrong), a build at the tolerance (1 + tolerance:
promoting it is wrong, and this is where the rule errs most often) and one 20% slower (promoting it is
wrong). It prints, per noise shape, truth and rule, the share promoted, rolled back and inconclusive and
the median blocks to a verdict, then the worst wrong-decision rate of each rule.

    .venv/bin/python benchmarks/rollout_decisions.py               # 100 trials a cell (about a minute)
    .venv/bin/python benchmarks/rollout_decisions.py --trials 400  # tighter rates (a few minutes)

Targets (its last lines): the paired rule's wrong decisions at most 5% in every cell, and fewer than
the baseline's in the worst cell.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gco.rollout.blocks import order  # noqa: E402
from gco.rollout.decision import Block, Rule, VersionBlock, decide  # noqa: E402

BASE_TTFT_MS, BASE_LATENCY_MS = 40.0, 400.0
BASELINE_FAILED_CHECKS = 2  # Flagger's `threshold`
BASELINE_ITERATIONS = 10  # checks passed before it promotes
Noise = Callable[[np.random.Generator, int, int], float]  # (rng, block, request index in run) -> factor


def lognormal(rng: np.random.Generator, block: int, index: int) -> float:
    return float(np.exp(rng.normal(0, 0.10)))


def make_block_effect() -> Noise:
    effects: dict[int, float] = {}

    def noise(rng: np.random.Generator, block: int, index: int) -> float:
        if block not in effects:
            effects[block] = float(np.exp(rng.normal(0, 0.10)))
        return effects[block] * float(np.exp(rng.normal(0, 0.05)))

    return noise


def drift(rng: np.random.Generator, block: int, index: int) -> float:
    return (1 + 0.002 * index) * float(np.exp(rng.normal(0, 0.05)))


def heavy_tail(rng: np.random.Generator, block: int, index: int) -> float:
    spike = 3.0 if rng.random() < 0.05 else 1.0
    return spike * float(np.exp(rng.normal(0, 0.05)))


SHAPES: dict[str, Callable[[], Noise]] = {
    "log-normal 10%": lambda: lognormal,
    "block effect 10% + 5%": make_block_effect,
    "drift 0.2%/request + 5%": lambda: drift,
    "heavy tail 5% x3 + 5%": lambda: heavy_tail,
}


def simulate_block(
    rng: np.random.Generator, noise: Noise, truth: float, block: int, k: int, start: int
) -> tuple[Block, dict[str, list[float]]]:
    """One block in ABBA order: medians for the paired rule, raw latencies for the baseline."""
    raw: dict[str, list[tuple[float, float]]] = {"primary": [], "canary": []}
    for offset, version in enumerate(order(k)):
        factor = noise(rng, block, start + offset) * (truth if version == "canary" else 1.0)
        raw[version].append((BASE_TTFT_MS * factor, BASE_LATENCY_MS * factor))

    def part(version: str) -> VersionBlock:
        values = raw[version]
        return VersionBlock(
            requests=len(values),
            errors=0,
            ttft_ms=statistics.median(t for t, _ in values),
            latency_ms=statistics.median(latency for _, latency in values),
        )

    latencies = {version: [latency for _, latency in values] for version, values in raw.items()}
    return Block(primary=part("primary"), canary=part("canary")), latencies


def trial(
    rng: np.random.Generator, noise: Noise, truth: float, rule: Rule, k: int
) -> tuple[tuple[str, int], ...]:
    """((paired verdict, blocks), (baseline verdict, blocks)) of one simulated Region."""
    blocks: list[Block] = []
    paired: tuple[str, int] | None = None
    baseline: tuple[str, int] | None = None
    failed = 0
    for index in range(max(rule.max_blocks, BASELINE_ITERATIONS)):
        block, latencies = simulate_block(rng, noise, truth, index, k, index * 2 * k)
        blocks.append(block)
        if paired is None and index < rule.max_blocks:
            verdict = decide(blocks, rule, seed=index).verdict
            paired = (verdict, index + 1) if verdict != "continue" else None
        if baseline is None:
            ratio = float(np.mean(latencies["canary"]) / np.mean(latencies["primary"]))
            failed += ratio > rule.bound
            if failed >= BASELINE_FAILED_CHECKS:
                baseline = ("rollback", index + 1)
            elif index + 1 >= BASELINE_ITERATIONS:
                baseline = ("promote", index + 1)
        if paired is not None and baseline is not None:
            break
    assert paired is not None
    assert baseline is not None
    return paired, baseline


def wrong(truth: float, verdict: str, rule: Rule) -> bool:
    """A slower build (at or beyond the tolerance) promoted, or an equal one rolled back."""
    return (truth >= rule.bound and verdict == "promote") or (truth == 1.0 and verdict == "rollback")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100, help="Simulated rollouts per cell.")
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--block-requests", type=int, default=8, help="Requests per version per block.")
    parser.add_argument("--seed", type=int, default=37)
    args = parser.parse_args()
    rule = Rule(tolerance=args.tolerance)
    truths = (1.0, rule.bound, 1.2)
    print(
        f"rule: tolerance {rule.tolerance}, blocks {rule.min_blocks}-{rule.max_blocks} of "
        f"{args.block_requests} requests a version, each look at level {rule.level:.4f}; baseline: "
        f"{BASELINE_FAILED_CHECKS} failed raw-mean checks roll back, {BASELINE_ITERATIONS} blocks promote"
    )
    print(
        f"{'noise':<26}{'truth':>6}  {'rule':<9}{'promote':>8}{'rollback':>9}{'inconcl.':>9}"
        f"{'wrong':>7}{'blocks':>7}"
    )
    worst = {"paired": 0.0, "threshold": 0.0}
    rng = np.random.default_rng(args.seed)
    for shape, make in SHAPES.items():
        for truth in truths:
            results: dict[str, list[tuple[str, int]]] = {"paired": [], "threshold": []}
            for _ in range(args.trials):
                paired, baseline = trial(rng, make(), truth, rule, args.block_requests)
                results["paired"].append(paired)
                results["threshold"].append(baseline)
            for name, outcomes in results.items():
                counts = Counter(verdict for verdict, _ in outcomes)
                share = {v: counts[v] / len(outcomes) for v in ("promote", "rollback", "inconclusive")}
                rate = sum(wrong(truth, verdict, rule) for verdict, _ in outcomes) / len(outcomes)
                worst[name] = max(worst[name], rate)
                blocks = statistics.median(n for _, n in outcomes)
                print(
                    f"{shape:<26}{truth:>6.2f}  {name:<9}{share['promote']:>8.1%}{share['rollback']:>9.1%}"
                    f"{share['inconclusive']:>9.1%}{rate:>7.1%}{blocks:>7.0f}"
                )
    print(f"worst wrong-decision rate, paired rule: {worst['paired']:.1%} (target at most 5%)")
    print(
        f"worst wrong-decision rate, threshold baseline: {worst['threshold']:.1%} "
        "(the paired rule's must be lower)"
    )
    held = worst["paired"] <= 0.05 and worst["paired"] < worst["threshold"]
    print("targets held" if held else "targets NOT held")
    return 0 if held else 1


if __name__ == "__main__":
    raise SystemExit(main())
