"""The polling loop: progress lines handed to the report callback, the last one marked, the deadline."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gco.waiting import Progress, WaitTimeoutError, changes, wait_for


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_each_poll_is_reported_and_the_finishing_one_is_last() -> None:
    states: Iterator[Progress[int | None]] = iter(
        [Progress(0, 2, False, "a b", None), Progress(1, 2, False, "b", None), Progress(2, 2, True, "", 9)]
    )
    clock, lines = FakeClock(), list[tuple[str, bool]]()
    value = wait_for(
        lambda: next(states),
        what="two",
        timeout=10,
        sleep=clock.sleep,
        clock=clock,
        report=lambda line, last: lines.append((line, last)),
    )
    assert value == 9
    assert lines == [("two: 0/2 a b", False), ("two: 1/2 b", False), ("two: 2/2", True)]
    assert clock.now == 2.0


def test_the_deadline_raises_naming_what_is_pending_after_a_last_report() -> None:
    clock, lines = FakeClock(), list[tuple[str, bool]]()
    with pytest.raises(WaitTimeoutError, match="timed out after 3 s waiting for x: us-east-1 pending"):
        wait_for(
            lambda: Progress(0, 1, False, "us-east-1 pending", None),
            what="x",
            timeout=3,
            sleep=clock.sleep,
            clock=clock,
            report=lambda line, last: lines.append((line, last)),
        )
    assert [last for _, last in lines] == [False, False, False, True]


def test_changes_emits_a_line_only_when_it_differs() -> None:
    emitted: list[str] = []
    report = changes(emitted.append)
    for line, last in [("a", False), ("a", False), ("b", False), ("b", True)]:
        report(line, last)
    assert emitted == ["a", "b"]
