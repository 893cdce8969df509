"""The decision rule on injected blocks: promote, roll back, inconclusive, the error test, the blocks."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from gco.rollout.blocks import Sample, Version, measure, order, summary
from gco.rollout.decision import Block, Rule, VersionBlock, decide, sign_test_p
from gco.rollout.errors import RolloutInputError

RULE = Rule()


def blocks_of(ratio: float, count: int, *, noise: float = 0.02, seed: int = 1, **errors: int) -> list[Block]:
    """`count` blocks whose canary takes `ratio` times the primary's time, each block's values jittered."""
    rng = np.random.default_rng(seed)
    made = []
    for _ in range(count):
        shared = float(np.exp(rng.normal(0, 0.1)))  # what a block shares cancels in the pairing
        primary = [shared * float(np.exp(rng.normal(0, noise))) for _ in range(2)]
        canary = [ratio * shared * float(np.exp(rng.normal(0, noise))) for _ in range(2)]
        made.append(
            Block(
                primary=VersionBlock(
                    requests=8,
                    errors=errors.get("primary", 0),
                    ttft_ms=40 * primary[0],
                    latency_ms=400 * primary[1],
                ),
                canary=VersionBlock(
                    requests=8,
                    errors=errors.get("canary", 0),
                    ttft_ms=40 * canary[0],
                    latency_ms=400 * canary[1],
                ),
            )
        )
    return made


def first_verdict(ratio: float, rule: Rule, **kwargs: float) -> tuple[str, int]:
    """The first verdict other than continue as blocks come, looking after each (as a rollout does)."""
    made = blocks_of(ratio, rule.max_blocks, **kwargs)  # type: ignore[arg-type]
    for count in range(1, rule.max_blocks + 1):
        decision = decide(made[:count], rule, seed=count)
        if decision.verdict != "continue":
            return decision.verdict, count
    raise AssertionError("no verdict by max_blocks")


def test_an_equal_canary_is_promoted_once_its_interval_is_narrow_enough() -> None:
    verdict, count = first_verdict(1.0, RULE)
    assert verdict == "promote"
    assert RULE.min_blocks < count < RULE.max_blocks  # the corrected first looks are too wide at n=4
    decision = decide(blocks_of(1.0, count), RULE, seed=count)
    assert set(decision.ratios) == {"ttft_ms", "latency_ms"}
    assert all(e.hi is not None and e.hi <= RULE.bound for e in decision.ratios.values())


def test_a_canary_20_percent_slower_is_rolled_back_at_the_first_look() -> None:
    decision = decide(blocks_of(1.2, RULE.min_blocks), RULE)
    assert decision.verdict == "rollback"
    assert "lies above 1.05" in decision.reason


def test_before_the_first_look_the_rule_waits() -> None:
    assert decide(blocks_of(1.5, RULE.min_blocks - 1), RULE).verdict == "continue"
    assert decide([], RULE).verdict == "continue"


def test_a_canary_at_the_tolerance_is_never_promoted_and_ends_inconclusive() -> None:
    """Noise wide enough that the interval straddles 1.05 at every look: no verdict until max_blocks."""
    rule = Rule(max_blocks=8)
    seen = [decide(blocks_of(1.05, n, noise=0.2, seed=3), rule).verdict for n in range(1, 9)]
    assert "promote" not in seen
    assert seen[-1] in ("inconclusive", "rollback")
    assert seen[:-1] == ["continue"] * 7 or "rollback" in seen


def test_a_failing_canary_is_rolled_back_by_the_sign_test_before_any_interval() -> None:
    one = blocks_of(1.0, 1, canary=8)
    assert decide(one, RULE).verdict == "continue"  # 8 of 8 failures: p = 0.0039 > 0.05 / 40
    two = blocks_of(1.0, 2, canary=8)
    decision = decide(two, RULE)
    assert decision.verdict == "rollback"
    assert decision.canary_errors == 16
    assert decision.error_p == pytest.approx(0.5**16)


def test_a_canary_with_more_errors_is_not_promoted_even_when_fast() -> None:
    rule = Rule(max_blocks=5)
    blocks = blocks_of(1.0, 4) + blocks_of(1.0, 1, canary=1)
    decision = decide(blocks, rule)
    assert decision.verdict == "inconclusive"
    assert (decision.canary_errors, decision.primary_errors) == (1, 0)
    even = blocks_of(1.0, 4, canary=1, primary=1)
    assert decide(even, rule).verdict == "promote"


def test_the_sign_test() -> None:
    assert sign_test_p(0, 0) == 1.0
    assert sign_test_p(1, 0) == pytest.approx(0.5)
    assert sign_test_p(3, 1) == pytest.approx(5 / 16)


def test_each_look_is_corrected_for_every_look() -> None:
    assert RULE.looks == 17
    assert RULE.level == pytest.approx(1 - 0.05 / 17)
    with pytest.raises(ValidationError, match="min_blocks"):
        Rule(min_blocks=10, max_blocks=5)
    with pytest.raises(ValidationError):
        Rule(tolerance=0)


def test_the_block_order_is_abba_and_balanced() -> None:
    assert order(4) == ["primary", "canary", "canary", "primary"] * 2
    assert order(2).count("canary") == 2 and len(order(6)) == 12
    for bad in (0, 3, -2):
        with pytest.raises(RolloutInputError, match="--block-requests"):
            order(bad)


def test_a_blocks_summary_takes_answered_medians_and_counts_failures() -> None:
    samples = [
        Sample(version="primary", ok=True, ttft_ms=10, latency_ms=100),
        Sample(version="canary", ok=False, status=500),
        Sample(version="canary", ok=True, ttft_ms=30, latency_ms=300),
        Sample(version="primary", ok=True, ttft_ms=20, latency_ms=200),
    ]
    block = summary(samples)
    assert (block.primary.requests, block.primary.errors, block.primary.ttft_ms) == (2, 0, 15)
    assert (block.canary.requests, block.canary.errors, block.canary.latency_ms) == (2, 1, 300)
    none = summary([Sample(version="canary", ok=False)])
    assert none.canary.ttft_ms is None and none.primary.requests == 0


def test_measure_sends_in_the_blocks_order() -> None:
    sent: list[str] = []

    def send(version: Version) -> Sample:
        sent.append(version)
        return Sample(version=version, ok=True, ttft_ms=1, latency_ms=2)

    block, samples = measure(send, 4)
    assert sent == order(4) and len(samples) == 8 and block.canary.requests == 4
