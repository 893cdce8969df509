"""Williams designs: engine orders balanced for position and first-order carry-over.

n even: one n x n square; n odd: 2n sequences (the square and its mirror). Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

DEFAULT_ROUNDS = {2: 4, 3: 6, 4: 4, 5: 10}
ADAPTIVE_MAX_ROUNDS = 12


class RoundPlan(BaseModel):
    """The engine order of every round, and whether the count of rounds balances it."""

    model_config = ConfigDict(frozen=True)

    labels: tuple[str, ...]
    rounds: tuple[tuple[str, ...], ...]
    period: int
    balanced: bool


def williams_sequences(n: int) -> list[list[int]]:
    """The Williams sequences of indices 0..n-1.

    Returns:
        n rows when n is even, 2n rows (each row then its reverse) when n is odd; one row for n=1.

    Raises:
        ValueError: `n` is not positive.
    """
    if n < 1:
        raise ValueError("n must be positive")
    if n == 1:
        return [[0]]
    first: list[int] = []
    low, high = 0, n - 1
    for position in range(n):
        if position % 2 == 0:
            first.append(low)
            low += 1
        else:
            first.append(high)
            high -= 1
    square = [[(value + shift) % n for value in first] for shift in range(n)]
    if n % 2 == 0:
        return square
    return square + [list(reversed(row)) for row in square]


def period(n: int) -> int:
    """Rounds in one whole Williams period for n engines.

    Raises:
        ValueError: `n` is not positive.
    """
    return len(williams_sequences(n))


def default_rounds(n: int) -> int:
    """The default round count: the smallest multiple of the period that is >= 3.

    Raises:
        ValueError: `n` is not positive.
    """
    if n in DEFAULT_ROUNDS:
        return DEFAULT_ROUNDS[n]
    p = period(n)
    return p * max(1, -(-3 // p))


def adaptive_max_rounds(n: int, maximum: int = ADAPTIVE_MAX_ROUNDS) -> int:
    """The adaptive maximum, rounded up to whole periods.

    Raises:
        ValueError: `n` is not positive.
    """
    p = period(n)
    return p * max(1, -(-maximum // p))


def plan_rounds(labels: Sequence[str], rounds: int) -> RoundPlan:
    """Cycle the Williams sequences over `rounds` rounds; balanced only on whole periods.

    Raises:
        ValueError: `rounds` is not positive.
    """
    if rounds < 1:
        raise ValueError("rounds must be positive")
    sequences = williams_sequences(len(labels))
    ordered = tuple(tuple(labels[i] for i in sequences[r % len(sequences)]) for r in range(rounds))
    p = len(sequences)
    return RoundPlan(labels=tuple(labels), rounds=ordered, period=p, balanced=rounds % p == 0)
