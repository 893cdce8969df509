"""The run's two waits: its endpoints becoming ready, and its HPA endpoints holding their replicas.

Each polls through a port with the clock and sleep injected, within the limit the caller gives (the
step's own timeout, cut at the run's deadline), and returns per endpoint an `Outcome` and the seconds
it took; the caller records them. The ready wait ends at once when an endpoint cannot become ready:
its Region reports a terminal error for its lifecycle (the reconciler's `error` status: what no
retry mends), its record is gone, or it has had no ready replica for `queue_timeout_seconds` (no GPU
capacity, pods never scheduled).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gco.endpoints.store import EndpointStore
from gco.errors import GcoError
from gco.validation import checks
from gco.validation.checkpoint import EndpointEntry
from gco.validation.ports import ClusterReader
from gco.validation.settings import QUEUE_TIMEOUT, MatrixSettings
from gco.waiting import Progress, Report, WaitTimeoutError, silent, wait_for

Timed = dict[str, tuple[checks.Outcome, float]]


def cannot_be_ready(region: str, seen: checks.Readiness, waited: float, queue: int) -> checks.Outcome | None:
    """Why an endpoint that is not ready never will be within the bounds, or None (keep waiting)."""
    if seen.error is not None:
        data = {"region": region, "region_state": "error", "region_error": seen.error}
        return checks.Outcome(False, f"{region} reports a terminal error: {seen.error}", data)
    if seen.state == "no record":
        return checks.Outcome(False, "its record is gone (deleted or destroyed while the run was down)")
    if seen.replicas_ready == 0 and waited >= queue:
        detail = (
            f"no replica ready within {QUEUE_TIMEOUT} ({queue} s), {seen.state}: no GPU "
            "capacity, or its pods were never scheduled"
        )
        return checks.Outcome(False, detail, {"timeout": QUEUE_TIMEOUT, "state": seen.state})
    return None


def await_ready(
    store: EndpointStore,
    region: str,
    names: Sequence[str],
    settings: MatrixSettings,
    *,
    limit: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    report: Report = silent,
) -> Timed:
    """Poll every endpoint's record until all are ready, one cannot be, or `limit` seconds passed.

    Parameters:
        report: shown each poll's progress line (`gco.waiting.Report`).
    """
    started, when_ready = clock(), dict[str, float]()
    stopped: dict[str, checks.Outcome] = {}

    def poll() -> Progress[None]:
        states = {}
        for name in names:
            seen = checks.ready(store.get(name, consistent_read=True), region)
            states[name] = seen.state
            if seen.done:
                when_ready.setdefault(name, clock() - started)
                continue
            found = cannot_be_ready(region, seen, clock() - started, settings.queue_timeout_seconds)
            if found is not None:
                stopped.setdefault(name, found)
        waiting = [f"{name} {states[name]}" for name in names if name not in when_ready]
        return Progress(len(when_ready), len(names), not waiting or bool(stopped), "; ".join(waiting), None)

    try:
        wait_for(
            poll,
            what=f"{len(names)} endpoints ready in {region}",
            timeout=limit,
            interval=settings.poll_interval_seconds,
            sleep=sleep,
            clock=clock,
            report=report,
        )
        problem = ""
    except (WaitTimeoutError, GcoError) as error:
        problem = str(error)
    first = next(iter(stopped), None)
    found: Timed = {}
    for name in names:
        seconds = when_ready.get(name)
        if seconds is not None:
            detail = f"ready after {seconds:.1f} s"
            found[name] = (checks.Outcome(True, detail, {"ready_seconds": round(seconds, 3)}), seconds)
            continue
        outcome = stopped.get(name) or checks.Outcome(
            False, f"not awaited: {first} cannot be ready" if first else problem or "not ready"
        )
        found[name] = (outcome, clock() - started)
    return found


def sample_hpa(
    reader: ClusterReader,
    targets: Sequence[EndpointEntry],
    settings: MatrixSettings,
    *,
    limit: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> Timed:
    """Sample each HPA endpoint once per monitor interval until it showed its replicas long enough."""
    wanted, need = settings.hpa_max_replicas, settings.hpa_stability_intervals
    streak = {e.name: 0 for e in targets}
    samples: dict[str, list[list[int]]] = {e.name: [] for e in targets}
    started = clock()
    while True:
        for entry in targets:
            if streak[entry.name] >= need:
                continue
            try:
                current, ready_count = checks.hpa_replicas(reader, entry.name, entry.lifecycle_id)
            except GcoError:
                current = ready_count = -1
            samples[entry.name].append([current, ready_count])
            held = current == wanted and ready_count == wanted
            streak[entry.name] = streak[entry.name] + 1 if held else 0
        if all(count >= need for count in streak.values()) or clock() - started >= limit:
            break
        sleep(settings.monitor_interval_seconds)
    seconds = clock() - started
    found: Timed = {}
    for entry in targets:
        last = samples[entry.name][-1] if samples[entry.name] else [0, 0]
        held = streak[entry.name] >= need
        detail = (
            f"held {wanted} replicas for {need} samples"
            if held
            else f"current {last[0]}, ready {last[1]} (want {wanted} for {need} consecutive samples) "
            f"after {seconds:.0f} s"
        )
        found[entry.name] = (checks.Outcome(held, detail, {"samples": samples[entry.name]}), seconds)
    return found
