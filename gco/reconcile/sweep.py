"""The scheduled sweep: re-read every record and reconcile it (drift, missed events, retries).

One consistent scan of the table and one label-selector list per managed kind give a snapshot;
an endpoint whose snapshot shows nothing to do costs no further call, so a sweep over endpoints
already as desired makes no DynamoDB write and no Kubernetes write. Anything to do is done by
`Reconciler.reconcile` from fresh reads. Objects labelled for an endpoint that has no record are
reconciled too (a fresh read confirms the record is gone before they are removed).

Each sweep first ensures the Region's namespaces and shared proxy (`system.py`) from the same
snapshot: reads, and writes only where something differs. A sweep that could list its Region ends
with the reconciler's heartbeat (`heartbeat.py`): an SSM parameter of the Region, not the table.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from gco.reconcile.failures import report_failure
from gco.reconcile.heartbeat import HeartbeatWriter
from gco.reconcile.objects import ENDPOINT_LABEL, MANAGED_BY, MANAGER, labels_of
from gco.reconcile.reconciler import Reconciler
from gco.reconcile.replica_metrics import not_ready, replica_counts

log = logging.getLogger(__name__)
ENTRY = "sweep"


@dataclass
class SweepReport:
    """What one sweep did. `failed` names endpoints whose reconcile raised, `unreadable` the keys of
    items that do not parse; `error` is set when the Region could not be listed at all (nothing was
    reconciled), `system_error` when its namespaces or shared proxy could not be ensured;
    `heartbeat` says whether the heartbeat was written (None: none was due or none is written)."""

    endpoints: int = 0
    done: int = 0
    requeued: int = 0
    terminal: int = 0
    orphans: int = 0
    failed: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    error: str | None = None
    system_error: str | None = None
    heartbeat: bool | None = None
    seconds: float = 0.0
    # (ready, desired) replicas of each endpoint with a record, from the snapshot (replica_metrics.py)
    replicas: dict[str, tuple[int, int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "endpoints": self.endpoints,
            "done": self.done,
            "requeued": self.requeued,
            "terminal": self.terminal,
            "orphans": self.orphans,
            "failed": list(self.failed),
            "unreadable": list(self.unreadable),
            "error": self.error,
            "system_error": self.system_error,
            "heartbeat": self.heartbeat,
            "seconds": round(self.seconds, 3),
            "not_ready": not_ready(self.replicas),
        }


def sweep(reconciler: Reconciler, *, heartbeat: HeartbeatWriter | None = None) -> SweepReport:
    """Reconcile every endpoint (and every orphaned object) in the reconciler's Region, then write
    `heartbeat` (where given) if the Region could be listed.

    Never raises: every step is guarded (`failures.py`). If the table or the cluster cannot be
    listed, the report says so and nothing is touched; an unreadable item is named in the report
    (its objects are left as they are: they are not orphans); a failure on one endpoint is
    logged and named in the report, and the sweep goes on.
    """
    started = time.monotonic()
    report = SweepReport()
    region = reconciler.region
    try:
        listing = reconciler.store.scan(consistent_read=True)
        snapshot = reconciler.cluster.list({MANAGED_BY: MANAGER})
    except Exception as error:  # one rule for every failure: failures.py
        report_failure(ENTRY, "*", region, error)
        report.error = str(error) or type(error).__name__
        report.seconds = time.monotonic() - started
        return report
    report.unreadable = [problem.key for problem in listing.unreadable]
    for problem in listing.unreadable:
        report_failure(ENTRY, problem.key, region, problem)
    try:
        reconciler.ensure_system(snapshot)
    except Exception as error:  # each endpoint's reconcile tries again, and reports its own failure
        report_failure(ENTRY, "system objects", region, error)
        report.system_error = str(error) or type(error).__name__
    observed: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for obj in snapshot:
        name = labels_of(obj).get(ENDPOINT_LABEL)
        if name:
            observed[name].append(obj)
    records = listing.records
    report.endpoints = len(records)
    work = [(record.endpoint_name, record) for record in records]
    report.replicas = {name: replica_counts(observed.get(name, [])) for name, _ in work}
    known = {name for name, _ in work} | set(report.unreadable)
    orphans = sorted(name for name in observed if name not in known)
    report.orphans = len(orphans)
    for name, record in [*work, *((name, None) for name in orphans)]:
        try:
            if record is None:
                outcome = reconciler.reconcile(name, wait=0.0)
            else:
                outcome = reconciler.reconcile_snapshot(record, observed.get(name, []))
        except Exception as error:  # one rule for every failure: failures.py
            report_failure(ENTRY, name, region, error)
            report.failed.append(name)
            continue
        if outcome.kind == "done":
            report.done += 1
        elif outcome.kind == "requeue":
            report.requeued += 1
        else:
            report.terminal += 1
    if heartbeat is not None:
        report.heartbeat = heartbeat.beat(region)
    report.seconds = time.monotonic() - started
    return report
