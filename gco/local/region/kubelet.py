"""Engines behind the stand-in API server: one local process per replica of each endpoint Deployment.

Stands in for what a real cluster does below the API server for gco's Deployments: the Deployment
and ReplicaSet controllers, the scheduler and the kubelets (pods started and stopped, readiness
probes) and the Service endpoints. Each `sync()`:

- lists the endpoint Deployments stored in the stand-in (`gco.dev/endpoint` labelled) and reads
  from each pod template what it serves (`gco.local.region.engines.launch_of`);
- starts one engine process (own process group, loopback port, log file) per missing replica,
  stops the newest surplus replicas on scale-down, and stops every process of a Deployment that is
  gone or terminating (SIGTERM to the group, SIGKILL after `stop_timeout`);
- restarts an engine that exited as the kubelet restarts a container of a Pod with
  `restartPolicy: Always` (a Deployment's only policy): the replica is unready from the moment
  it is seen gone (so its Service stops sending to it), waits a back-off that starts at 10 s,
  doubles after each further exit up to 5 minutes, and resets once the engine ran 10 minutes
  (kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#container-restarts), counts its
  restarts, and reports it meanwhile as `CrashLoopBackOff` with the last exit;
- rolls a changed pod template as `maxUnavailable: 0` does: replicas of the old template keep
  serving until as many of the new one are ready;
- probes each engine's health path as the kubelet's prober worker does
  (kubernetes/kubernetes pkg/kubelet/prober/worker.go, `doProbe`): a replica becomes ready on its
  first 2xx answer and unready only after its container's `readinessProbe.failureThreshold`
  consecutive failures (3 when unset, the API's default), so one slow answer from a busy engine
  does not take it out of its Service; an engine that exited is unready at once (a container that
  is not running is never ready);
- gives each engine its container's `env`: a `value` as is, and a `valueFrom.secretKeyRef` as the
  kubelet resolves it, from the named Secret's `data` key (base64-decoded) in the pod's namespace
  (kubernetes.io/docs/concepts/configuration/secret/#using-secrets-as-environment-variables); while
  the Secret or its key is missing, the Deployment's engines are not started, as a real kubelet
  leaves such a container in `CreateContainerConfigError` and retries.

The stand-in reads the counts through its `replica_source` hook and reports them in the
Deployment's `status` (`replicas`, `readyReplicas`, `availableReplicas`, `updatedReplicas`), as the
Deployment controller writes them, so the reconciler observes real readiness. Its `pods` hook answers
the stand-in's Pod lists: one Pod per replica with the container status a kubelet reports
(`ready`, `restartCount`, `state.running|waiting`, `lastState.terminated` with `exitCode` as the
container runtime gives it, 128 + the signal for a signalled process, and `signal`).

It does not model: pods as API objects, scheduling onto nodes or GPUs, init containers (a
`model_source` is not synced), probes' periods, timeouts and `successThreshold` (every replica is
probed once a pass with `probe_timeout`, and one success makes it ready), liveness restarts (an
engine that hangs stays unready, not restarted), `maxSurge` (every missing new replica starts at
once), or a Pod's IP kept across restarts (a restarted engine
listens on a new loopback port), `optional` secret references, `configMapKeyRef`/`fieldRef` env, or a
Secret changed after an engine started (a real container keeps the values it started with, too).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import json
import logging
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gco.local.processes.listen import LOOPBACK, free_port
from gco.local.region.engines import EngineLaunch, EngineTable, launch_of
from gco.local.region.loop import SyncLoop
from gco.local.standin import StandInKubeAPI
from gco.local.standin.labels import matches
from gco.processes.identity import Started
from gco.processes.launch import EngineProcess, clean_env
from gco.reconcile.objects import DEPLOYMENT, ENDPOINT_LABEL, SECRET

log = logging.getLogger(__name__)

# A probe's `failureThreshold` when the container leaves it unset (the Kubernetes API's default,
# kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#Probe).
DEFAULT_FAILURE_THRESHOLD = 3


def _digest(template: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RestartPolicy:
    """The kubelet's container restart back-off: `initial` seconds, doubled after each further exit up
    to `cap`, back to `initial` once a container ran `reset_after` seconds (10 s, 5 min, 10 min)."""

    initial: float = 10.0
    cap: float = 300.0
    reset_after: float = 600.0

    def next_delay(self, previous: float | None, ran: float) -> float:
        """The wait before restarting a container that exited after running `ran` seconds."""
        if previous is None or ran >= self.reset_after:
            return self.initial
        return min(previous * 2, self.cap)


@dataclass
class Replica:
    """One replica (a Pod): its engine process, where it listens, whether its probe answered, and its
    restarts; `waiting_until` is set while it waits out its back-off after an exit."""

    serial: int
    digest: str
    port: int
    health_path: str
    process: EngineProcess
    container: str = "engine"
    failure_threshold: int = DEFAULT_FAILURE_THRESHOLD
    ready: bool = False
    probe_failures: int = 0  # consecutive failed readiness probes
    started_at: float = 0.0
    restarts: int = 0
    last_exit: int | None = None
    backoff: float | None = None
    waiting_until: float | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def pod(self, name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
        """This replica as the API server shows its Pod (the fields a reconciler reads)."""
        status: dict[str, Any] = {
            "name": self.container,
            "ready": self.ready,
            "restartCount": self.restarts,
            "state": {"running": {}},
        }
        if self.waiting_until is not None:
            message = f"back-off {self.backoff:g}s restarting failed container={self.container} pod={name}"
            status["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
        if self.last_exit is not None:
            status["lastState"] = {"terminated": terminated(self.last_exit)}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "status": {"phase": "Running", "containerStatuses": [status]},
        }


def terminated(returncode: int) -> dict[str, Any]:
    """A container's `lastState.terminated` for a process that exited with `returncode` (negative: the
    signal that killed it). The container runtime reports a signalled process as 128 + the signal."""
    if returncode < 0:
        number = -returncode
        return {"exitCode": 128 + number, "signal": number, "reason": "Error"}
    return {"exitCode": returncode, "reason": "Completed" if returncode == 0 else "Error"}


@dataclass
class _Workload:
    """The engines of one Deployment and what it last asked for."""

    digest: str = ""
    replicas: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    running: list[Replica] = field(default_factory=list)


@dataclass(frozen=True)
class _Wanted:
    replicas: int
    digest: str
    launch: EngineLaunch
    env: dict[str, str] = field(repr=False)  # may hold Secrets' values: never in a repr or a log
    labels: dict[str, str]
    container: str
    failure_threshold: int


class LocalKubelet:
    """Runs the engines of one stand-in cluster; `sync()` once, or `start()` a loop until `stop()`.

    Parameters:
        api: the Region's stand-in API server (its `replica_source` is set to this runner).
        table: which program runs each framework.
        log_dir: one log file per engine process.
        stop_timeout: seconds between SIGTERM and SIGKILL of an engine's group.
        probe_timeout: seconds one health probe may take.
        restart: the restart back-off of an engine that exited.
        clock: seconds, monotonic (injected by tests).
    """

    def __init__(
        self,
        api: StandInKubeAPI,
        table: EngineTable,
        log_dir: Path,
        *,
        stop_timeout: float = 5.0,
        probe_timeout: float = 1.0,
        restart: RestartPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.restart = restart or RestartPolicy()
        self.clock = clock
        self.table = table
        self.log_dir = log_dir
        self.stop_timeout = stop_timeout
        self.probe_timeout = probe_timeout
        self._workloads: dict[tuple[str, str], _Workload] = {}
        # Deployments whose readiness probes are made to fail (`gco local fail-region --unready`): their
        # engines keep running and answering, but are out of their Service, as after a failed probe.
        self.failing_probes: set[str] = set()
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._serial = itertools.count(1)
        self._loop = SyncLoop(self.sync, name="local-kubelet")
        api.replica_source = self.observed
        api.pod_source = self.pods

    # -- what the stand-in and the router read ------------------------------------------------

    def observed(self, deployment: Mapping[str, Any]) -> dict[str, int] | None:
        """The status counts of `deployment`, or None for one this runner never runs (gco's proxy)."""
        meta = deployment.get("metadata") or {}
        template = (deployment.get("spec") or {}).get("template") or {}
        if ENDPOINT_LABEL not in (meta.get("labels") or {}) or launch_of(template) is None:
            return None
        digest = _digest(template)
        with self._lock:
            workload = self._workloads.get((meta.get("namespace", ""), meta.get("name", "")))
            running = workload.running if workload is not None else []
            ready = sum(r.ready for r in running)
            updated = sum(r.digest == digest for r in running)
            return {
                "replicas": len(running),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "updatedReplicas": updated,
            }

    def backends(self, namespace: str, selector: Mapping[str, str]) -> list[str]:
        """Base URLs of the ready engines a Service with `selector` in `namespace` sends traffic to."""
        return [url for url, _ in self.targets(namespace, selector)]

    def targets(self, namespace: str, selector: Mapping[str, str]) -> list[tuple[str, dict[str, str]]]:
        """(base URL, pod labels) of the ready engines a Service with `selector` in `namespace` sends
        traffic to."""
        with self._lock:
            return [
                (replica.url, dict(workload.labels))
                for (ns, _), workload in sorted(self._workloads.items())
                if ns == namespace
                and selector
                and all(workload.labels.get(k) == v for k, v in selector.items())
                for replica in workload.running
                if replica.ready
            ]

    def ready_urls(self, namespace: str, name: str) -> list[str]:
        """Base URLs of the ready engines of Deployment `namespace/name`."""
        with self._lock:
            workload = self._workloads.get((namespace, name))
            return [r.url for r in workload.running if r.ready] if workload is not None else []

    def pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """The Pods of `namespace` whose template labels match `label_selector` (one per replica)."""
        with self._lock:
            return [
                replica.pod(f"{name}-{replica.serial}", ns, workload.labels)
                for (ns, name), workload in sorted(self._workloads.items())
                if ns == namespace and matches(workload.labels, label_selector)
                for replica in workload.running
            ]

    def engine_logs(self) -> list[tuple[str, Replica, Path]]:
        """Every replica as `(namespace/name #serial, replica, its current engine log)`."""
        with self._lock:
            return [
                (f"{ns}/{name} #{replica.serial}", replica, replica.process.log_path)
                for (ns, name), workload in sorted(self._workloads.items())
                for replica in workload.running
            ]

    def pids(self) -> list[int]:
        """Process-group ids of every engine this runner started and has not stopped."""
        return [group.pid for group in self.groups()]

    def groups(self) -> list[Started]:
        """Every engine this runner started and has not stopped, as started (each leads its group)."""
        with self._lock:
            running = [
                r.process.started
                for w in self._workloads.values()
                for r in w.running
                if r.waiting_until is None
            ]
        return sorted(running, key=lambda group: group.pid)

    # -- the loop ------------------------------------------------------------------------------

    def sync(self) -> None:
        """One pass: read the Deployments, start, replace and stop engines, probe readiness."""
        with self._sync_lock:
            wanted = self._wanted()
            to_stop: list[Replica] = []
            with self._lock:
                for key in list(self._workloads):
                    if key not in wanted:
                        to_stop += self._workloads.pop(key).running
                for key, want in wanted.items():
                    to_stop += self._converge(key, want)
            for replica in to_stop:
                self._halt(replica)
            self._probe()

    def _wanted(self) -> dict[tuple[str, str], _Wanted]:
        deployments, _ = self.api.list(DEPLOYMENT, None, "")
        wanted: dict[tuple[str, str], _Wanted] = {}
        for obj in deployments:
            meta = obj.get("metadata") or {}
            if ENDPOINT_LABEL not in (meta.get("labels") or {}) or meta.get("deletionTimestamp"):
                continue  # gco's shared proxy, or terminating: runs nothing
            template = (obj.get("spec") or {}).get("template") or {}
            launch = launch_of(template)
            if launch is None:
                continue
            container = next(
                c for c in template["spec"]["containers"] if "httpGet" in (c.get("readinessProbe") or {})
            )
            env = self._env(str(meta["namespace"]), container.get("env") or [])
            if env is None:
                continue  # a referenced Secret or key is missing: its containers cannot start yet
            wanted[(meta["namespace"], meta["name"])] = _Wanted(
                replicas=int((obj.get("spec") or {}).get("replicas", 1)),
                digest=_digest(template),
                launch=launch,
                env=env,
                labels=dict((template.get("metadata") or {}).get("labels") or {}),
                container=str(container.get("name") or "engine"),
                failure_threshold=int(
                    container["readinessProbe"].get("failureThreshold", DEFAULT_FAILURE_THRESHOLD)
                ),
            )
        return wanted

    def _env(self, namespace: str, items: list[dict[str, Any]]) -> dict[str, str] | None:
        """The container's environment with each `secretKeyRef` resolved; None while one cannot be."""
        env: dict[str, str] = {}
        for item in items:
            ref = (item.get("valueFrom") or {}).get("secretKeyRef")
            if ref is None:
                env[str(item["name"])] = str(item.get("value", ""))
                continue
            secret = self.api.get(SECRET, namespace, str(ref.get("name")))
            data = (secret or {}).get("data") or {}
            if str(ref.get("key")) not in data:
                return None
            env[str(item["name"])] = base64.b64decode(data[str(ref.get("key"))]).decode()
        return env

    def _converge(self, key: tuple[str, str], want: _Wanted) -> list[Replica]:
        """Under the lock: decide which replicas go and start the missing ones; returns those to stop."""
        workload = self._workloads.setdefault(key, _Workload())
        workload.digest, workload.replicas, workload.labels = want.digest, want.replicas, want.labels
        going: list[Replica] = []
        for replica in workload.running:
            self._restart_policy(key, replica, want)
        alive = workload.running
        current = [r for r in alive if r.digest == want.digest]
        old = [r for r in alive if r.digest != want.digest]
        if sum(r.ready for r in current) >= want.replicas:
            going += old  # the new template serves: the old one goes
            old = []
        surplus = current[want.replicas :] if len(current) > want.replicas else []
        going += surplus
        current = current[: want.replicas]
        started = [self._launch(key, want) for _ in range(want.replicas - len(current))]
        workload.running = [*old, *current, *started]
        return going

    def _restart_policy(self, key: tuple[str, str], replica: Replica, want: _Wanted) -> None:
        """Under the lock: note an engine that exited and start its back-off; restart it once over."""
        now = self.clock()
        if replica.waiting_until is None and replica.process.exited():
            code = int(replica.process.popen.returncode)
            replica.ready, replica.last_exit = False, code
            replica.backoff = self.restart.next_delay(replica.backoff, now - replica.started_at)
            replica.waiting_until = now + replica.backoff
            log.warning(
                "engine %s/%s #%d exited (%s%s); restart %d in %g s (CrashLoopBackOff)",
                *key,
                replica.serial,
                code,
                f", {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals() else "",
                replica.restarts + 1,
                replica.backoff,
            )
        elif (
            replica.waiting_until is not None
            and now >= replica.waiting_until
            and replica.digest == want.digest
        ):
            replica.restarts += 1
            replica.port = free_port()
            replica.process = self._process(key, want, replica.serial, replica.port, replica.restarts)
            replica.waiting_until, replica.started_at, replica.probe_failures = None, now, 0

    def _process(
        self, key: tuple[str, str], want: _Wanted, serial: int, port: int, restart: int
    ) -> EngineProcess:
        env = clean_env({}, os.environ).env | want.env | {"PORT": str(port)}
        argv = self.table.argv(want.launch, port)
        suffix = f".restart{restart}" if restart else ""
        process = EngineProcess(argv, env, self.log_dir / f"{key[0]}.{key[1]}.{serial}{suffix}.log")
        log.info("engine %s/%s #%d started on port %d (pid %d)", *key, serial, port, process.pgid)
        return process

    def _launch(self, key: tuple[str, str], want: _Wanted) -> Replica:
        port = free_port()
        serial = next(self._serial)
        process = self._process(key, want, serial, port, 0)
        launch = want.launch
        replica = Replica(
            serial, want.digest, port, launch.health_path, process, want.container, want.failure_threshold
        )
        replica.started_at = self.clock()
        return replica

    def _halt(self, replica: Replica) -> None:
        report = replica.process.stop(self.stop_timeout)
        log.info("engine #%d stopped (%s, group gone: %s)", replica.serial, report.signal, report.group_gone)

    def fail_probes(self, names: set[str], failing: bool = True) -> None:
        """Make the readiness probes of Deployments `names` fail from now on (or pass again from the
        next probe): a failing replica is unready at once, out of its Service and its status."""
        with self._lock:
            self.failing_probes = self.failing_probes | names if failing else self.failing_probes - names
            for (_, name), workload in self._workloads.items():
                for replica in workload.running if failing and name in names else ():
                    replica.ready = False

    def _probe(self) -> None:
        with self._lock:
            replicas = [(name, r) for (_, name), w in self._workloads.items() for r in w.running]
        results = {id(r): (not r.process.exited()) and self._answers(r) for _, r in replicas}
        with self._lock:  # a probe made to fail (`fail_probes`) meanwhile wins over this pass's answer
            for name, replica in replicas:
                if name in self.failing_probes:
                    replica.ready = False
                elif results[id(replica)]:
                    replica.ready, replica.probe_failures = True, 0
                else:
                    replica.probe_failures += 1
                    if replica.process.exited() or replica.probe_failures >= replica.failure_threshold:
                        replica.ready = False

    def _answers(self, replica: Replica) -> bool:
        try:
            url = replica.url + replica.health_path
            with urllib.request.urlopen(url, timeout=self.probe_timeout) as response:  # noqa: S310 - loopback
                return 200 <= int(response.status) < 300
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def start(self, interval: float = 0.2) -> LocalKubelet:
        """Sync every `interval` seconds on a background thread."""

        self._loop.start(interval)
        return self

    def stop(self) -> None:
        """Stop the loop and every engine process."""
        self._loop.stop()
        with self._sync_lock, self._lock:
            replicas = [r for w in self._workloads.values() for r in w.running]
            self._workloads.clear()
        for replica in replicas:
            with contextlib.suppress(Exception):
                self._halt(replica)
