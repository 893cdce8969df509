"""A health checker per Region, as Route 53's health checks judge an endpoint.

Route 53's health checkers ask an endpoint every 10 or 30 seconds, and judge it on "whether the
endpoint responds to a number of consecutive health checks that you specify (the failure
threshold)" (docs.aws.amazon.com/Route53/latest/DeveloperGuide/dns-failover-determining-health-of-
endpoints.html); `FailureThreshold` is "the number of consecutive health checks that an endpoint
must pass or fail for Amazon Route 53 to change the current status of the endpoint from unhealthy
to healthy or vice versa", three when not given (the Route 53 API reference, HealthCheckConfig).
An HTTP(S) check passes on a 2xx or 3xx status. Here one checker polls each Region's
proxy `/healthz` on a thread, with the same threshold rule (`HealthState`, pure, its clock
injected); the local interval is a fraction of a second, where Route 53's is 10 or 30 s from many
checkers around the world: the local checker models the rule, not the timing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)
FAILURE_THRESHOLD = 3  # Route 53's default FailureThreshold
CHECK_INTERVAL_S = 0.25
CHECK_TIMEOUT_S = 1.0


@dataclass
class HealthState:
    """One endpoint's status under the consecutive-checks rule; starts healthy, as Route 53 does
    for a new health check until checks say otherwise."""

    threshold: int = FAILURE_THRESHOLD
    healthy: bool = True
    streak: int = 0  # consecutive checks that disagreed with `healthy`
    changed_at: float | None = None  # when `healthy` last flipped (clock seconds)
    last_checked: float | None = None

    def observe(self, passed: bool, now: float) -> bool:
        """Record one check's result at `now`; returns whether the status flipped."""
        self.last_checked = now
        if passed == self.healthy:
            self.streak = 0
            return False
        self.streak += 1
        if self.streak < self.threshold:
            return False
        self.healthy, self.streak, self.changed_at = passed, 0, now
        return True


@dataclass
class HealthChecker:
    """Checks every Region's proxy with `probe` every `interval` seconds on a daemon thread.

    Parameters:
        targets: Region -> the URL its check asks (the proxy's `/healthz`).
        probe: whether one URL passes (an HTTP 2xx or 3xx within the timeout).
        clock: seconds (monotonic), injected by tests.
    """

    targets: Mapping[str, str]
    probe: Callable[[str], bool]
    clock: Callable[[], float] = time.monotonic
    interval: float = CHECK_INTERVAL_S
    threshold: int = FAILURE_THRESHOLD
    states: dict[str, HealthState] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.states = {region: HealthState(threshold=self.threshold) for region in self.targets}

    def check_once(self) -> None:
        """Check every Region once (in turn) and record the results."""
        for region, url in self.targets.items():
            passed = self.probe(url)
            with self._lock:
                if self.states[region].observe(passed, self.clock()):
                    log.warning("Region %s is now %s", region, "healthy" if passed else "unhealthy")

    def healthy(self, region: str) -> bool:
        """Whether `region`'s last judged status is healthy (an unknown Region is not)."""
        with self._lock:
            state = self.states.get(region)
            return state is not None and state.healthy

    def snapshot(self) -> dict[str, bool]:
        with self._lock:
            return {region: state.healthy for region, state in self.states.items()}

    def start(self) -> HealthChecker:
        def loop() -> None:
            while not self._stop.is_set():
                try:
                    self.check_once()
                except Exception:  # a check that raised counts as nothing; the next one runs
                    log.exception("health check failed")
                self._stop.wait(self.interval)

        self._thread = threading.Thread(target=loop, name="global-health", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
