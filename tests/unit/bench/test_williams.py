"""Williams design properties for 2..8 engines, default rounds, and round plans."""

from __future__ import annotations

from collections import Counter

import pytest

from gco.bench.rounds.williams import (
    adaptive_max_rounds,
    default_rounds,
    period,
    plan_rounds,
    williams_sequences,
)


@pytest.mark.parametrize("n", range(2, 9))
def test_each_row_is_a_permutation_and_each_engine_takes_each_position_equally(n: int) -> None:
    rows = williams_sequences(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    for row in rows:
        assert sorted(row) == list(range(n))
    per_square = len(rows) // n
    for position in range(n):
        assert Counter(row[position] for row in rows) == dict.fromkeys(range(n), per_square)


@pytest.mark.parametrize("n", range(2, 9))
def test_each_engine_directly_follows_each_other_equally_often(n: int) -> None:
    rows = williams_sequences(n)
    pairs = Counter((row[i], row[i + 1]) for row in rows for i in range(n - 1))
    expected = 1 if n % 2 == 0 else 2
    assert pairs == {(a, b): expected for a in range(n) for b in range(n) if a != b}


def test_default_rounds_follow_the_spec() -> None:
    assert [default_rounds(n) for n in (2, 3, 4, 5)] == [4, 6, 4, 10]
    for n in range(1, 9):
        rounds = default_rounds(n)
        assert rounds >= 3
        assert rounds % period(n) == 0
        assert rounds - period(n) < 3


def test_adaptive_maximum_is_rounded_up_to_whole_periods() -> None:
    assert adaptive_max_rounds(2) == 12
    assert adaptive_max_rounds(5) == 20
    assert adaptive_max_rounds(7, maximum=12) == 14


def test_plan_cycles_sequences_and_names_balance() -> None:
    plan = plan_rounds(["a", "b", "c"], 7)
    assert len(plan.rounds) == 7
    assert plan.period == 6
    assert not plan.balanced
    assert plan.rounds[6] == plan.rounds[0]
    assert plan_rounds(["a", "b"], 4).balanced
    assert plan_rounds(["solo"], 3).rounds == (("solo",),) * 3


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        williams_sequences(0)
    with pytest.raises(ValueError, match="positive"):
        plan_rounds(["a"], 0)
