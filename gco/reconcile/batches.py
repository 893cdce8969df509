"""Running one piece of work per endpoint of a batch, up to a number at a time, each result in a future.

Endpoints are independent (each reads its own record and objects), so a batch's reconciles run
concurrently; a future per endpoint holds its result or the exception it raised, so that one
endpoint's failure is reported for it alone (the stream handler's partial batch response).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

Result = TypeVar("Result")


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
