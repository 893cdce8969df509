"""A Region's Lambda execution environments for the stream handler, each a process of its own.

Lambda runs each concurrent invocation of a function in an execution environment of its own, busy
with that one request until it ends ("For each concurrent request, Lambda provisions a separate
instance of your execution environment": Understanding Lambda function scaling,
https://docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html). With a parallelization
factor an event source mapping has several batches of one shard in flight, so the stream function
runs in that many environments at once, each with its own interpreter, memory and CPU.

The local stack's poller (`StreamPoller`) invoked every batch on a thread of the Region's process:
one interpreter and one GIL, so however many cores a machine had, the Region's batches shared
one, and they shared one route keeper too (which coalesced their route refreshes, as environments
in AWS cannot). `ExecutionEnvironments` is the poller's handler instead: each invocation goes to an
idle environment process (spawned once, before the first record, each with its own reconciler,
DynamoDB client and API-server client, made by `start_environment` from an `EnvironmentConfig`),
and returns what the handler returned there. An exception raised there is raised again in the
poller, which counts the batch failed, as Lambda does for a function error.

What it does not model: cold starts after the first (the environments are started before the first
record and never recycled), the environment's memory and its CPU share (Lambda gives CPU in
proportion to memory), the invocation's timeout, and the event source mapping's own throttling
when the function's reserved concurrency is used up (`count` is the most in flight).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from gco.local.errors import LocalStackError

# The one handler of this environment process (set by `start_environment`, its initializer), and the
# barrier every environment meets at once as the pool starts (`_pid`).
_HANDLER: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None
_STARTED: Any = None
STARTUP_TIMEOUT_S = 60.0  # every environment imported gco and built its clients (a busy 2-core machine)


@dataclass(frozen=True)
class EnvironmentConfig:
    """What one environment needs to build the Region's stream handler (picklable: it crosses into
    each environment process).

    Fields:
        region: the Region the reconciler serves.
        table: the home Region's endpoint table.
        endpoint_url: the DynamoDB endpoint (the local moto server).
        api_url: the Region's API server (a stand-in process).
        token: the bearer token the API server accepts.
        probe: ask the Region's proxy pods before reporting `running` (`PodProxyProbe`).
        timeout: seconds one API-server call may take.
        attempts, base_delay, max_delay: the API-server client's retries (`RetryPolicy`).
    """

    region: str
    table: str
    endpoint_url: str
    api_url: str
    token: str
    probe: bool = True
    timeout: float = 2.0
    attempts: int = 6
    base_delay: float = 0.01
    max_delay: float = 0.1


def start_environment(config: EnvironmentConfig) -> None:
    """An environment's init phase: build the reconciler and its clients, and the Region's system
    objects checked once (as the handler's first invocation would), before any invocation."""
    global _HANDLER  # noqa: PLW0603 (the process's one handler, as a Lambda module's global)
    from gco import aws
    from gco.endpoints import EndpointStore
    from gco.reconcile.handler import handle_stream_event
    from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
    from gco.reconcile.proxy.proxy_probe import PodProxyProbe
    from gco.reconcile.reconciler import Reconciler

    store = EndpointStore(aws.client("dynamodb", endpoint_url=config.endpoint_url), config.table)
    retry = RetryPolicy(attempts=config.attempts, base_delay=config.base_delay, max_delay=config.max_delay)
    kube = KubeCluster(config.api_url, static_token(config.token), timeout=config.timeout, retry=retry)
    probe = PodProxyProbe(kube) if config.probe else None
    reconciler = Reconciler(store, kube, config.region, probe=probe, wait=0.0)
    reconciler.ensure_system()

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return handle_stream_event(event, reconciler, context)

    _HANDLER = handler


def _invoke(event: dict[str, Any]) -> dict[str, Any]:
    """One invocation, in an environment process."""
    if _HANDLER is None:
        raise LocalStackError("the execution environment was not started")
    return _HANDLER(event, None)


def _start(config: EnvironmentConfig, started: Any) -> None:
    """The pool's initializer: the environment's init phase, and the start's barrier kept."""
    global _STARTED  # noqa: PLW0603
    _STARTED = started
    start_environment(config)


def _pid() -> int:
    """This environment's process id, once every environment has started (`ExecutionEnvironments.start`
    makes one such call per environment: each waits at the barrier, so no environment runs two)."""
    _STARTED.wait(timeout=STARTUP_TIMEOUT_S)
    return os.getpid()


class ExecutionEnvironments:
    """`count` environment processes of one Region's stream handler; the poller's `handler`.

    Use as a context manager, or `start()` / `close()`. Calling it (`event, context`) runs one
    invocation in an idle environment and returns its batch response.
    """

    def __init__(self, config: EnvironmentConfig, count: int) -> None:
        if count < 1:
            raise LocalStackError(f"environments: count must be at least 1, not {count}")
        self.config = config
        self.count = count
        self.pids: list[int] = []
        self._pool: ProcessPoolExecutor | None = None

    def start(self) -> ExecutionEnvironments:
        """Spawn every environment and run its init phase; returns once all are ready.

        Raises:
            LocalStackError: an environment did not start within STARTUP_TIMEOUT_S.
        """
        # spawn, not fork: the Region's process already runs threads (its clients' pools), and a forked
        # child would inherit their locks in whatever state they were
        context = multiprocessing.get_context("spawn")
        self._pool = ProcessPoolExecutor(
            max_workers=self.count,
            mp_context=context,
            initializer=_start,
            initargs=(self.config, context.Barrier(self.count)),
        )
        # One call per environment at once: the pool spawns a process for each call that finds none idle.
        calls = [self._pool.submit(_pid) for _ in range(self.count)]
        try:
            self.pids = sorted({call.result(timeout=STARTUP_TIMEOUT_S) for call in calls})
        except Exception as error:
            self.close()
            raise LocalStackError(
                f"the {self.config.region} execution environments did not start: {error}"
            ) from error
        return self

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        if self._pool is None:
            raise LocalStackError("the execution environments are not started")
        return self._pool.submit(_invoke, event).result()

    def cpu_seconds(self) -> float:
        """CPU seconds (user and system) the environments have used so far, from /proc."""
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for pid in self.pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended
            total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (proc(5))
        return total

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> ExecutionEnvironments:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
