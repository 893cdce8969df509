"""Engines behind the stand-in API server: one local process per replica of each endpoint Deployment.

Stands in for what a real cluster does below the API server for gco's Deployments: the Deployment
and ReplicaSet controllers, the scheduler and the kubelets (pods started and stopped, readiness
probes) and the Service endpoints. Each `sync()`:

- lists the endpoint Deployments stored in the stand-in (`gco.dev/endpoint` labelled) and reads
  from each pod template what it serves (`gco.local.engines.launch_of`);
- starts one engine process (own process group, loopback port, log file) per missing replica,
  replaces an engine that exited (the replica is unready from the moment it is seen gone), stops
  the newest surplus replicas on scale-down, and stops every process of a Deployment that is gone
  or terminating (SIGTERM to the group, SIGKILL after `stop_timeout`);
- rolls a changed pod template as `maxUnavailable: 0` does: replicas of the old template keep
  serving until as many of the new one are ready;
- probes each engine's health path: a replica is ready while it answers 2xx.

The stand-in reads the counts through its `replica_source` hook and reports them in the
Deployment's `status` (`replicas`, `readyReplicas`, `availableReplicas`, `updatedReplicas`), as the
Deployment controller writes them, so the reconciler observes real readiness.

It does not model: pods as API objects, scheduling onto nodes or GPUs, init containers (a
`model_source` is not synced), probes' periods and thresholds (one failed probe makes a replica
unready), liveness restarts (an engine that hangs stays unready, not restarted), or
`maxSurge` (every missing new replica starts at once).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import os
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gco.bench.process import EngineProcess, clean_env
from gco.local.engines import EngineLaunch, EngineTable, launch_of
from gco.local.loop import SyncLoop
from gco.local.standin import StandInKubeAPI
from gco.reconcile.objects import DEPLOYMENT, ENDPOINT_LABEL

log = logging.getLogger(__name__)
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A loopback port free at the time of asking (the engine binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def _digest(template: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class Replica:
    """One running engine: the template it runs, where it listens, whether its probe answered."""

    serial: int
    digest: str
    port: int
    health_path: str
    process: EngineProcess
    ready: bool = False

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"


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
    env: dict[str, str]
    labels: dict[str, str]


class LocalKubelet:
    """Runs the engines of one stand-in cluster; `sync()` once, or `start()` a loop until `stop()`.

    Parameters:
        api: the Region's stand-in API server (its `replica_source` is set to this runner).
        table: which program runs each framework.
        log_dir: one log file per engine process.
        stop_timeout: seconds between SIGTERM and SIGKILL of an engine's group.
        probe_timeout: seconds one health probe may take.
    """

    def __init__(
        self,
        api: StandInKubeAPI,
        table: EngineTable,
        log_dir: Path,
        *,
        stop_timeout: float = 5.0,
        probe_timeout: float = 1.0,
    ) -> None:
        self.api = api
        self.table = table
        self.log_dir = log_dir
        self.stop_timeout = stop_timeout
        self.probe_timeout = probe_timeout
        self._workloads: dict[tuple[str, str], _Workload] = {}
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._serial = itertools.count(1)
        self._loop = SyncLoop(self.sync, name="local-kubelet")
        api.replica_source = self.observed

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
        with self._lock:
            return [
                replica.url
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

    def pids(self) -> list[int]:
        """Process-group ids of every engine this runner started and has not stopped."""
        with self._lock:
            return sorted(r.process.pgid for w in self._workloads.values() for r in w.running)

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
            env = {str(item["name"]): str(item.get("value", "")) for item in container.get("env") or []}
            wanted[(meta["namespace"], meta["name"])] = _Wanted(
                replicas=int((obj.get("spec") or {}).get("replicas", 1)),
                digest=_digest(template),
                launch=launch,
                env=env,
                labels=dict((template.get("metadata") or {}).get("labels") or {}),
            )
        return wanted

    def _converge(self, key: tuple[str, str], want: _Wanted) -> list[Replica]:
        """Under the lock: decide which replicas go and start the missing ones; returns those to stop."""
        workload = self._workloads.setdefault(key, _Workload())
        workload.digest, workload.replicas, workload.labels = want.digest, want.replicas, want.labels
        going = [r for r in workload.running if r.process.exited()]
        for replica in going:
            log.warning(
                "engine %s/%s #%d exited (%s)", *key, replica.serial, replica.process.popen.returncode
            )
        alive = [r for r in workload.running if r not in going]
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

    def _launch(self, key: tuple[str, str], want: _Wanted) -> Replica:
        port = free_port()
        serial = next(self._serial)
        env = clean_env({}, os.environ).env | want.env | {"PORT": str(port)}
        argv = self.table.argv(want.launch, port)
        process = EngineProcess(argv, env, self.log_dir / f"{key[0]}.{key[1]}.{serial}.log")
        log.info("engine %s/%s #%d started on port %d (pid %d)", *key, serial, port, process.pgid)
        return Replica(serial, want.digest, port, want.launch.health_path, process)

    def _halt(self, replica: Replica) -> None:
        report = replica.process.stop(self.stop_timeout)
        log.info("engine #%d stopped (%s, group gone: %s)", replica.serial, report.signal, report.group_gone)

    def _probe(self) -> None:
        with self._lock:
            replicas = [r for w in self._workloads.values() for r in w.running]
        results = {id(r): (not r.process.exited()) and self._answers(r) for r in replicas}
        with self._lock:
            for replica in replicas:
                replica.ready = results[id(replica)]

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
