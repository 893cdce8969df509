"""Running work concurrently: one piece per endpoint of a batch, and the leaf requests of one step.

Endpoints are independent (each reads its own record and objects), so a batch's reconciles run
concurrently; a future per endpoint holds its result or the exception it raised, so that one
endpoint's failure is reported for it alone (the stream handler's partial batch response).

A step's requests (a plan's applies, the route shards a refresh merges, the proxy pods asked or
annotated) are leaves: each is one request, and none waits for other work of the pool. They run on
one pool per process (`each_leaf`), made on first use, whose threads are kept: a pool made and shut
down per step cost its caller about four times the CPU of the step's hand-off to kept threads (the
thread starts), once per endpoint reconciled. No more than `MAX_LEAVES` run at once in a process,
the API-server client's keep-alive connections (`kubeapi.MAX_CONNECTIONS`); each step also bounds
its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
MAX_LEAVES = 64  # leaf requests in flight at once in one process
_leaves: dict[int, ThreadPoolExecutor] = {}  # process id -> its pool (a forked child has no threads)
_leaves_made = threading.Lock()


def _leaf_pool() -> ThreadPoolExecutor:
    pid = os.getpid()
    with _leaves_made:
        pool = _leaves.get(pid)
        if pool is None:
            _leaves.clear()  # the parent's pool, if this process was forked: its threads are not here
            pool = _leaves[pid] = ThreadPoolExecutor(max_workers=MAX_LEAVES, thread_name_prefix="leaf")
        return pool


def each_leaf(work: Callable[[Item], Result], items: Sequence[Item], limit: int) -> list[Result]:
    """`work(item)` for every item, at most `limit` at once, on the process's leaf pool (on this thread
    when there is one item); results in the items' order, the first error raised once all are done.

    `work` must be a leaf: it may not wait for other work of the pool (it would hold a thread the
    work it waits for may need)."""
    if len(items) <= 1:
        return [work(item) for item in items]
    pool = _leaf_pool()
    futures: list[Future[Result]] = []
    running: set[Future[Result]] = set()
    for item in items:
        if len(running) >= limit:
            _, running = wait(running, return_when=FIRST_COMPLETED)
        future = pool.submit(work, item)
        futures.append(future)
        running.add(future)
    wait(running)
    return [future.result() for future in futures]


def run_each(
    names: Sequence[str], work: Callable[[str], Result], concurrency: int
) -> dict[str, Future[Result]]:
    """`work(name)` for each of `names`, up to `concurrency` at once (on this thread when 1); returns
    when all are done."""
    workers = max(1, min(concurrency, len(names)))
    if workers > 1:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reconcile") as pool:
            return {name: pool.submit(work, name) for name in names}
    futures: dict[str, Future[Result]] = {}
    for name in names:
        futures[name] = Future()
        try:
            futures[name].set_result(work(name))
        except Exception as error:  # handed to the caller through the future
            futures[name].set_exception(error)
    return futures


def settled(value: Result | None = None, error: BaseException | None = None) -> Future[Result]:
    """A future already holding `value`, or `error` when given."""
    future: Future[Result] = Future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)  # type: ignore[arg-type]
    return future
