"""Why an endpoint's replicas are not ready, read from its Pods' container statuses (pure).

A Deployment's status says how many replicas are ready, not why the others are not. The kubelet
writes that into each Pod's `status.containerStatuses`: `restartCount`, `state.waiting.reason`
(`CrashLoopBackOff` while it waits out the restart back-off) and `lastState.terminated` (the last
exit's `exitCode`, as the container runtime reports it: 128 + the signal for a signalled process,
with `signal` set) (kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#container-states).
The reconciler lists the Pods only while a Deployment is short of ready replicas, and reports the
summary in the Region's status, so `gco inference status` and `deploy --wait` can say
`1/2 ready: engine exited 139 (SIGSEGV), CrashLoopBackOff, restarts 3`.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SIGNAL_BASE = 128  # a signalled process's exit code, as shells and container runtimes report it


@dataclass(frozen=True)
class PodTrouble:
    """What keeps replicas from being ready: restarts over the Pods, and the latest reason."""

    restarts: int
    reason: str


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_text(container: str, terminated: Mapping[str, Any]) -> str:
    """`engine exited 139 (SIGSEGV)` for a container's `lastState.terminated`."""
    code = int(terminated.get("exitCode", 0))
    number = int(terminated.get("signal") or (code - SIGNAL_BASE if code > SIGNAL_BASE else 0))
    shown = f" ({_signal_name(number)})" if number else ""
    return f"{container} exited {code}{shown}"


def trouble(pods: Sequence[Mapping[str, Any]]) -> PodTrouble | None:
    """The restarts of every container of `pods` and the reason of the first one not ready, or None
    when no container restarted or waits."""
    restarts = 0
    reasons: list[str] = []
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            restarts += int(status.get("restartCount") or 0)
            if status.get("ready"):
                continue
            parts = []
            terminated = (status.get("lastState") or {}).get("terminated")
            if terminated:
                parts.append(exit_text(str(status.get("name") or "container"), terminated))
            waiting = ((status.get("state") or {}).get("waiting") or {}).get("reason")
            if waiting:
                parts.append(str(waiting))
            if parts:
                reasons.append(", ".join(parts))
    if not reasons and not restarts:
        return None
    return PodTrouble(restarts=restarts, reason=reasons[0] if reasons else "restarted")
