"""One matrix run: deploy the four endpoints, check them, destroy them, take inventory.

The order: deploy `mx-<run>-{vllm,tgi}-{baseline,hpa}` in the selected Region, labelled with the
run's owner label; wait until all are ready; per endpoint probe health, model info and one
request; see each HPA endpoint hold 2 replicas for `hpa_stability_intervals` samples; check the
shared proxy; then, whatever failed, destroy every endpoint (fenced by the owner label and the
lifecycle id, so a record of the same name that is not this run's is never touched) and take the
final inventory. The first failed check skips the checks after it, never the destruction. Every
step lands in the checkpoint as it ends (and, with a mirror, in the evidence bucket); a resumed run
skips the steps that passed.

Bounds: the run's deadline (its start plus `job_timeout_seconds`, wall-clock, so it holds across
machines) ends the checks wherever they are, records a failed `job_timeout` step naming that step,
and goes on to the destruction; `queue_timeout_seconds` bounds how long an endpoint may have no
ready replica (no GPU capacity, pods never scheduled); a Region's terminal `error` status ends the
ready step at once with its reason.
"""

from __future__ import annotations

import math
import secrets
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gco.endpoints.errors import EndpointExistsError
from gco.endpoints.record import EndpointRecord
from gco.endpoints.store import EndpointStore
from gco.errors import GcoError
from gco.evidence.index import EvidenceIndex
from gco.evidence.record import now_iso
from gco.evidence.store import EvidenceStore
from gco.reconcile.expiry import DEADLINE_LABEL, OWNER_LABEL
from gco.validation import checks, waits
from gco.validation.checkpoint import (
    Checkpoint,
    EndpointEntry,
    Step,
    StepName,
    Verdict,
    checkpoint_bytes,
    revision_path,
    write_checkpoint,
)
from gco.validation.destroy import destroy_endpoint, records_of_run
from gco.validation.identity import ROLES, identity
from gco.validation.mirror import MirrorError, RunMirror
from gco.validation.ports import ClusterReader, Clusters, EndpointHttp
from gco.validation.report import MatrixResult, write_evidence
from gco.validation.settings import MatrixSettings, Runtime
from gco.waiting import changes


def new_run_id() -> str:
    """12 lowercase hex characters: short enough for endpoint names, random enough not to collide."""
    return secrets.token_hex(6)


def endpoint_name(run_id: str, runtime: Runtime, role: str) -> str:
    return f"mx-{run_id}-{runtime.framework}-{role}"


def new_checkpoint(
    settings: MatrixSettings, settings_path: Path, run_id: str, *, now: float | None = None
) -> Checkpoint:
    """A run not yet started; its deadline is `now` (default: the wall clock) plus the job timeout."""
    started = time.time() if now is None else now
    entries = [
        EndpointEntry(name=endpoint_name(run_id, runtime, role), framework=runtime.framework, role=role)
        for runtime in settings.inference_runtimes
        for role in ROLES
    ]
    return Checkpoint(
        run_id=run_id,
        settings_path=str(settings_path),
        identity=identity(settings),
        created_at=now_iso(),
        endpoints=entries,
        deadline=math.ceil(started + settings.job_timeout_seconds),
    )


def _echo(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass
class Matrix:
    """The ports and clock of a run; `execute` runs (or continues) one checkpointed run."""

    settings: MatrixSettings
    store: EndpointStore
    clusters: Clusters
    http: EndpointHttp
    run_dir: Path
    evidence_stores: list[EvidenceStore] = field(default_factory=list)
    evidence_indexes: list[EvidenceIndex] = field(default_factory=list)
    mirror: RunMirror | None = None
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time  # the deadline's clock: epoch seconds, the same on every machine
    sleep: Callable[[float], None] = time.sleep
    progress: Callable[[str], None] = _echo
    state: Checkpoint = field(init=False)
    region: str = field(init=False)

    def execute(self, checkpoint: Checkpoint) -> MatrixResult:
        """Run every step not yet passed, write the evidence, and return the verdict.

        Store, cluster and HTTP failures become failed steps; only the evidence stores may raise.
        """
        self.state = checkpoint
        self.region = self.settings.selected_region
        self._save()
        if self.state.failed_check() is None:
            if self._remaining() > 0:
                self._redeploy_vanished()
            self._checks()
        self._destroy_all(self.state.endpoints)
        self._step("inventory", None, self._inventory)
        failed = [s for s in self.state.steps if s.verdict == "fail" and not self._superseded(s)]
        verdict: Verdict = "fail" if failed else "pass"
        result = write_evidence(
            self.state, verdict, self.run_dir, self.evidence_stores, self.evidence_indexes
        )
        evidence = Path(result.evidence_path)
        for path in (evidence, evidence.with_suffix(".md"), evidence.with_suffix(".html")):
            self._mirror(path.relative_to(self.run_dir).as_posix(), path.read_bytes())
        self.state = self.state.model_copy(
            update={"finished": True, "verdict": verdict, "evidence_id": result.evidence_id}
        )
        self._save()
        self.progress(result.summary)
        return result

    def destroy(self, checkpoint: Checkpoint) -> checks.Outcome:
        """Destroy every endpoint of the run (`gco matrix destroy`), then take the inventory.

        Each endpoint of the checkpoint, and any other record carrying the run's owner label, is
        deleted fenced by that label and its lifecycle, retried, and awaited until purged; both
        land in the checkpoint as `destroy` and `inventory` steps (a later resume finishes the run
        from there). Returns the inventory: passed when nothing of the run is left.
        """
        self.state = checkpoint
        self.region = self.settings.selected_region
        self._save()
        known = {entry.name for entry in self.state.endpoints}
        strays = [
            EndpointEntry(
                name=r.endpoint_name, framework=r.spec.framework, role="", lifecycle_id=r.lifecycle_id
            )
            for r in records_of_run(self.store, self.state.run_id)
            if r.endpoint_name not in known
        ]
        self._destroy_all([*self.state.endpoints, *strays], again=True)
        started = self.clock()
        try:
            outcome = self._inventory()
        except GcoError as error:
            outcome = checks.Outcome(False, f"{type(error).__name__}: {error}")
        self._record("inventory", None, outcome, self.clock() - started)
        return outcome

    # -- the steps ----------------------------------------------------------------------------

    def _checks(self) -> None:
        for entry in self.state.endpoints:
            if not self._step("deploy", entry.name, lambda e=entry: self._deploy(e)):  # type: ignore[misc]
                return
        if not self._ready():
            return
        reader = self.clusters.reader(self.region)
        for entry in self.state.endpoints:
            if not self._probe(entry, reader):
                return
        if not self._hpa():
            return
        self._step("proxy", None, lambda: checks.proxy(reader, self.settings))

    def _redeploy_vanished(self) -> None:
        """On resume: an endpoint deployed earlier whose record is gone (deleted by someone else while
        the run was down) is deployed again, its earlier steps kept as superseded; healthy ones are
        left as they are. Never once destruction may have begun (every check passed, or a destroy
        step exists): a record purged by the run's own destruction is not an endpoint to bring back."""
        if self.state.passed("proxy", None) or any(s.step == "destroy" for s in self.state.steps):
            return
        for entry in self.state.endpoints:
            if entry.lifecycle_id and self.store.get(entry.name, consistent_read=True) is None:
                self.progress(f"matrix {self.state.run_id}: {entry.name} is gone; deploying it again")
                self.state = self.state.forget(entry.name)
        self._save()

    def _probe(self, entry: EndpointEntry, reader: ClusterReader) -> bool:
        """Health, then model info, then one request; False at the first that fails."""
        runtime = next(r for r in self.settings.inference_runtimes if r.framework == entry.framework)
        name, lifecycle = entry.name, self.state.endpoint(entry.name).lifecycle_id
        probes: list[tuple[StepName, Callable[[], checks.Outcome]]] = [
            ("health", lambda: checks.health(self.http, self.region, name, self.settings)),
            (
                "model_info",
                lambda: checks.model_info(self.http, reader, self.region, name, runtime, lifecycle),
            ),
            ("request", lambda: checks.request(self.http, self.region, name, self.settings, runtime)),
        ]
        return all(self._step(step, name, probe) for step, probe in probes)

    def _deploy(self, entry: EndpointEntry) -> checks.Outcome:
        runtime = next(r for r in self.settings.inference_runtimes if r.framework == entry.framework)
        labels = {OWNER_LABEL: self.state.run_id}
        if self.state.deadline is not None:
            labels[DEADLINE_LABEL] = str(self.state.deadline)
        record: EndpointRecord | None
        try:
            record = self.store.create(
                entry.name,
                checks.endpoint_spec(self.settings, runtime, entry.role),
                [self.region],
                namespace=self.settings.namespace,
                labels=labels,
                created_by=f"gco matrix {self.state.run_id}",
            )
        except EndpointExistsError:
            record = self.store.get(entry.name, consistent_read=True)
            if record is None or record.labels.get(OWNER_LABEL) != self.state.run_id:
                label = f"{OWNER_LABEL}={self.state.run_id}"
                detail = f"a record named {entry.name} exists without the label {label}: left untouched"
                return checks.Outcome(False, detail)
            if record.is_deleted:
                return checks.Outcome(False, f"this run's record {entry.name} is deleted, awaiting its purge")
        self._set_lifecycle(entry.name, record.lifecycle_id)
        return checks.Outcome(True, f"lifecycle {record.lifecycle_id}", {"lifecycle_id": record.lifecycle_id})

    def _ready(self) -> bool:
        """Wait for every endpoint to be ready, within readiness_timeout and the run's deadline."""
        pending = [e.name for e in self.state.endpoints if not self.state.passed("ready", e.name)]
        if not pending or self._timed_out("ready", None):
            return not pending
        found = waits.await_ready(
            self.store,
            self.region,
            pending,
            self.settings,
            limit=self._limit(self.settings.readiness_timeout_seconds),
            clock=self.clock,
            sleep=self.sleep,
            report=changes(self.progress),
        )
        return self._record_all("ready", found)

    def _hpa(self) -> bool:
        """See each HPA endpoint hold its replicas, within hpa_timeout and the run's deadline."""
        targets = [
            e for e in self.state.endpoints if e.role == "hpa" and not self.state.passed("hpa", e.name)
        ]
        if not targets or self._timed_out("hpa", None):
            return not targets
        found = waits.sample_hpa(
            self.clusters.reader(self.region),
            targets,
            self.settings,
            limit=self._limit(self.settings.hpa_timeout_seconds),
            clock=self.clock,
            sleep=self.sleep,
        )
        return self._record_all("hpa", found)

    def _record_all(self, step: StepName, found: waits.Timed) -> bool:
        """Record a wait's outcomes; True when all passed. A wait cut by the deadline records it."""
        for name, (outcome, seconds) in found.items():
            self._record(step, name, outcome, seconds)
        passed = all(outcome.passed for outcome, _ in found.values())
        if not passed:
            self._timed_out(step, None)
        return passed

    def _destroy_all(self, entries: list[EndpointEntry], *, again: bool = False) -> None:
        """Destroy the endpoints concurrently (each waits for its own purge); record each as it ends.

        Those destroyed before are skipped unless `again` (`gco matrix destroy` checks every one)."""
        pending = [e for e in entries if again or not self.state.passed("destroy", e.name)]
        if not pending:
            return
        with ThreadPoolExecutor(max_workers=len(pending), thread_name_prefix="matrix-destroy") as pool:
            futures = {pool.submit(self._destroy, entry): entry for entry in pending}
            for future in as_completed(futures):
                outcome, seconds = future.result()
                self._record("destroy", futures[future].name, outcome, seconds)

    def _destroy(self, entry: EndpointEntry) -> tuple[checks.Outcome, float]:
        started = self.clock()
        try:
            outcome = destroy_endpoint(
                self.store,
                entry,
                run_id=self.state.run_id,
                settings=self.settings,
                clock=self.clock,
                sleep=self.sleep,
                report=changes(self.progress),
            )
        except GcoError as error:
            outcome = checks.Outcome(False, f"{type(error).__name__}: {error}")
        return outcome, self.clock() - started

    def _inventory(self) -> checks.Outcome:
        records = [r.endpoint_name for r in records_of_run(self.store, self.state.run_id)]
        readers = {region: self.clusters.reader(region) for region in self.clusters.regions()}
        lifecycles = [e.lifecycle_id for e in self.state.endpoints if e.lifecycle_id]
        objects = checks.leftovers(readers, lifecycles)
        data: dict[str, Any] = {"records": records, "objects": objects, "regions": sorted(readers)}
        if records or objects:
            return checks.Outcome(False, f"left behind: records {records}, objects {objects}", data)
        return checks.Outcome(True, f"no record and no labelled object in {', '.join(sorted(readers))}", data)

    # -- bookkeeping --------------------------------------------------------------------------

    def _step(self, step: StepName, endpoint: str | None, work: Callable[[], checks.Outcome]) -> bool:
        """Run one step unless it passed before; record it; True when it passed."""
        if self.state.passed(step, endpoint):
            return True
        if step != "inventory" and self._timed_out(step, endpoint):
            return False
        started = self.clock()
        try:
            outcome = work()
        except GcoError as error:
            outcome = checks.Outcome(False, f"{type(error).__name__}: {error}")
        self._record(step, endpoint, outcome, self.clock() - started)
        return outcome.passed

    def _record(self, step: StepName, endpoint: str | None, outcome: checks.Outcome, seconds: float) -> None:
        verdict: Verdict = "pass" if outcome.passed else "fail"
        if outcome.data.get("skipped"):
            verdict = "skipped"
        attempts = int(outcome.data.get("attempts", 1))
        entry = Step(
            step=step,
            endpoint=endpoint,
            verdict=verdict,
            started_at=now_iso(),
            seconds=round(seconds, 3),
            detail=outcome.detail,
            attempts=attempts,
            data=outcome.data,
        )
        self.state = self.state.model_copy(update={"steps": [*self.state.steps, entry]})
        self._save()
        self.progress(
            f"matrix {self.state.run_id}: {step} {endpoint or ''} {verdict} ({seconds:.1f} s): "
            f"{outcome.detail}"
        )

    def _limit(self, timeout: int) -> float:
        """A wait's limit: its own timeout, cut at the run's deadline."""
        return min(float(timeout), max(0.0, self._remaining()))

    def _remaining(self) -> float:
        """Seconds left before the run's deadline (infinite for a checkpoint written before deadlines)."""
        return math.inf if self.state.deadline is None else self.state.deadline - self.wall()

    def _timed_out(self, step: StepName, endpoint: str | None) -> bool:
        """Whether the deadline has passed; the first time, a failed `job_timeout` step names `step`."""
        if self._remaining() > 0:
            return False
        if not any(s.step == "job_timeout" for s in self.state.steps):
            where = f"{step} {endpoint or ''}".rstrip()
            detail = (
                f"job_timeout_seconds ({self.settings.job_timeout_seconds} s) passed at {where}: destroying"
            )
            data = {"step": step, "endpoint": endpoint, "deadline": self.state.deadline}
            self._record("job_timeout", None, checks.Outcome(False, detail, data), 0.0)
        return True

    def _set_lifecycle(self, name: str, lifecycle_id: str | None) -> None:
        entries = [
            e.model_copy(update={"lifecycle_id": lifecycle_id}) if e.name == name else e
            for e in self.state.endpoints
        ]
        self.state = self.state.model_copy(update={"endpoints": entries})
        self._save()

    def _superseded(self, step: Step) -> bool:
        """A failed step that passed on a later try (a resumed run) no longer fails the run."""
        return step.step in ("ready", "hpa", "destroy") and self.state.passed(step.step, step.endpoint)

    def _save(self) -> None:
        """Write the next revision locally (atomically), then to the mirror."""
        self.state = self.state.model_copy(update={"revision": self.state.revision + 1})
        write_checkpoint(self.run_dir, self.state)
        self._mirror(revision_path(self.state.revision), checkpoint_bytes(self.state))

    def _mirror(self, relative: str, body: bytes) -> None:
        """Copy one file to the mirror; a failure is reported and the run goes on (the next save
        carries the whole state again)."""
        if self.mirror is None:
            return
        try:
            self.mirror.put(relative, body)
        except MirrorError as error:
            self.progress(f"matrix {self.state.run_id}: {error}")
