"""Failing a Region of `gco local up` on purpose: `gco local fail-region|restore-region`.

A Region's faults are a small JSON file in the state directory (`region-<R>.faults.json`) that the
Region's process (`node`) reads every report interval and applies to its clusters:

- `proxy_down`: the Region's proxy is stopped (its port refuses connections, as a Region whose way in
  is gone), and started again on the same port when the fault is lifted;
- `unready`: endpoints whose replicas' readiness probes fail (the engines keep running, out of their
  Services, as after failed probes), so the proxy answers 503 for them and the reconciler reports them
  not ready.

The process writes what it applied to `region-<R>.faults.applied.json`; `request` waits (bounded) until
that matches. Stands in for a Region's outage; it does not model partial network loss or slowness.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gco.local.errors import LocalStackError
from gco.local.region.cluster import LocalClusters

APPLY_TIMEOUT_S = 30.0
POLL_S = 0.05


class Faults(BaseModel):
    """What is failed in one Region."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    proxy_down: bool = False
    unready: list[str] = Field(default_factory=list)


def faults_path(state_dir: Path, region: str) -> Path:
    return state_dir / f"region-{region}.faults.json"


def applied_path(state_dir: Path, region: str) -> Path:
    return state_dir / f"region-{region}.faults.applied.json"


def read(path: Path) -> Faults:
    """The faults a file holds (none when it is missing or unreadable)."""
    try:
        return Faults.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Faults()


def _write(path: Path, faults: Faults) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(faults.model_dump_json(), encoding="utf-8")
    os.replace(temporary, path)


def apply(clusters: LocalClusters, region: str, wanted: Faults, current: Faults) -> Faults:
    """Bring `region`'s clusters from `current` faults to `wanted`; returns `wanted`."""
    if wanted.proxy_down and not current.proxy_down:
        clusters.fail_proxy(region)
    elif current.proxy_down and not wanted.proxy_down:
        clusters.restore_proxy(region)
    clusters.fail_readiness(region, set(current.unready) - set(wanted.unready), failing=False)
    clusters.fail_readiness(region, wanted.unready)
    return wanted


def follow(clusters: LocalClusters, region: str, state_dir: Path, current: Faults) -> Faults:
    """One look at the faults file: apply a change and report it (the node's report loop calls it)."""
    wanted = read(faults_path(state_dir, region))
    if wanted != current:
        current = apply(clusters, region, wanted, current)
    if read(applied_path(state_dir, region)) != current or not applied_path(state_dir, region).exists():
        _write(applied_path(state_dir, region), current)
    return current


def request(state_dir: Path, region: str, faults: Faults, timeout: float = APPLY_TIMEOUT_S) -> Faults:
    """Ask `region`'s process for `faults` and wait until it applied them.

    Raises:
        LocalStackError: the Region's process did not apply them within `timeout` seconds.
    """
    _write(faults_path(state_dir, region), faults)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if applied_path(state_dir, region).exists() and read(applied_path(state_dir, region)) == faults:
            return faults
        time.sleep(POLL_S)
    raise LocalStackError(f"Region {region} did not apply {faults.model_dump_json()} within {timeout:g} s")


def current(state_dir: Path, region: str) -> Faults:
    """The faults asked of `region` now."""
    return read(faults_path(state_dir, region))


def forget(state_dir: Path, region: str) -> None:
    """Remove `region`'s fault files (`gco local down`)."""
    faults_path(state_dir, region).unlink(missing_ok=True)
    applied_path(state_dir, region).unlink(missing_ok=True)
