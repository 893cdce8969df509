"""The leaf pool: a step's requests run concurrently on kept threads, bounded, in order, all finished."""

from __future__ import annotations

import os
import threading
import time

import pytest

from gco.reconcile import batches
from gco.reconcile.batches import each_leaf


def test_leaves_run_at_most_the_limit_at_once_and_answer_in_order() -> None:
    running = peak = 0
    lock = threading.Lock()

    def work(item: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.01)  # long enough that unbounded leaves would overlap
        with lock:
            running -= 1
        return item * 10

    assert each_leaf(work, list(range(6)), 2) == [0, 10, 20, 30, 40, 50]
    assert peak <= 2


def test_the_first_error_is_raised_once_every_leaf_is_done() -> None:
    finished: list[int] = []

    def work(item: int) -> int:
        if item == 0:
            raise ValueError("the first failed")
        time.sleep(0.01)
        finished.append(item)
        return item

    with pytest.raises(ValueError, match="the first failed"):
        each_leaf(work, [0, 1, 2], 3)
    assert sorted(finished) == [1, 2]  # not abandoned


def test_one_item_runs_on_the_callers_thread_and_threads_are_kept() -> None:
    assert each_leaf(lambda _: threading.current_thread().name, ["one"], 4) == [threading.main_thread().name]
    first = set(each_leaf(lambda _: threading.get_ident(), list(range(8)), 8))
    second = set(each_leaf(lambda _: threading.get_ident(), list(range(8)), 8))
    assert threading.get_ident() not in first | second
    assert second <= {thread.ident for thread in batches._leaf_pool()._threads}


def test_a_forked_process_makes_its_own_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool inherited through fork has no threads in the child: a process id it was not made in
    gets a new one."""
    parents = batches._leaf_pool()
    monkeypatch.setattr(os, "getpid", lambda: -1)
    childs = batches._leaf_pool()
    assert childs is not parents
    assert each_leaf(lambda item: item + 1, [1, 2], 2) == [2, 3]
    childs.shutdown(wait=True)
