"""Fault injection for the stand-in API server: what an overloaded or failing API server answers.

A test queues `Fault`s; the HTTP face takes the first one matching a request's method before it
authorizes the request (API Priority and Fairness rejects with 429 before authorization too) and
answers it as the fault says: a status (429, 500, 409, ...) with no effect, or a timeout that holds
the connection past the client's timeout and drops it, before the change is made ("before") or
after it ("after": the change is made, the answer lost; what a client retrying a write must
survive).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass
class Fault:
    """One injected fault: `status` answered without effect, or a timeout (`drop` before/after).

    Parameters:
        status: the HTTP status to answer (a Kubernetes `Status` body, `Retry-After: 0`).
        timeout: "before": dropped with no effect; "after": the change is made, the answer lost.
        method: only requests of this method (GET, PATCH, DELETE); None: any.
        times: how many requests it answers before it is used up.
    """

    status: int | None = None
    timeout: str | None = None  # "before" or "after"
    method: str | None = None
    times: int = 1


class FaultQueue:
    """The queued faults of one stand-in, in injection order; thread-safe."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    def inject(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def take(self, method: str) -> Fault | None:
        """The first fault for `method`, one of its `times` used up; None when none is queued."""
        with self._lock:
            for fault in self._faults:
                if fault.method in (None, method):
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def clear(self) -> None:
        """Drop every queued fault (a test ending its outage)."""
        with self._lock:
            self._faults.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._faults)
