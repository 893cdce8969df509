"""Randomised operation sequences with injected faults: after the stream and one sweep settle,
every cluster holds exactly the rendered objects of the live records (current lifecycle only),
nothing of deleted or purged ones, and every deleted record is purged.

A short run by default; GCO_SOAK=1 runs many seeds and long sequences.

It runs the reconciler library in this process (`local`): it reads the in-process reconciler and its
sweep reports."""

from __future__ import annotations

import random
from typing import Any

import pytest

from gco.endpoints import EndpointStore, InvalidTransitionError
from gco.local.region.reconcilers import LocalReconcilers
from gco.local.standin import Fault
from gco.reconcile.objects import LIFECYCLE_ANNOTATION, ObjectRef
from gco.reconcile.render import render
from tests.conftest import soak_enabled
from tests.unit.reconcile.records import EAST, IMAGE, WEST

SEEDS = range(12) if soak_enabled() else range(1)
STEPS = 120 if soak_enabled() else 16
NAMES = ["alpha", "beta", "gamma"]


def act(store: EndpointStore, rng: random.Random, name: str) -> None:
    record = store.get(name)
    if record is None:
        regions = rng.choice([[EAST], [WEST], [EAST, WEST]])
        store.create(name, {"image": IMAGE, "replicas": rng.randint(1, 3)}, regions)
        return
    if record.is_deleted or record.lifecycle_id is None:
        return
    choice = rng.choice(["spec", "scale", "stop", "start", "regions", "delete"])
    try:
        if choice == "spec":
            spec: dict[str, Any] = {"image": IMAGE, "env": {"SEED": str(rng.random())}}
            if rng.random() < 0.3:
                spec["canary"] = {"image": IMAGE, "weight": 10}
            store.update_spec(name, spec, record.lifecycle_id)
        elif choice == "scale" and record.spec.canary is None:
            store.scale(name, rng.randint(0, 3), record.lifecycle_id)
        elif choice == "stop":
            store.update_desired_state(name, "stopped", expected_lifecycle_id=record.lifecycle_id)
        elif choice == "start":
            store.start(name, record.lifecycle_id)
        elif choice == "regions":
            targets = rng.choice([[EAST], [WEST], [EAST, WEST]])
            store.update_target_regions(
                name,
                targets,
                expected_lifecycle_id=record.lifecycle_id,
                expected_updated_at=record.updated_at or "",
            )
        elif choice == "delete":
            store.update_desired_state(name, "deleted")
    except InvalidTransitionError:
        pass  # e.g. start of a running endpoint: refused, nothing written


@pytest.mark.parametrize("seed", SEEDS)
def test_random_operations_converge(store: EndpointStore, local: LocalReconcilers, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(STEPS):
        act(store, rng, rng.choice(NAMES))
        if rng.random() < 0.3:
            stack = local.regions[rng.choice([EAST, WEST])]
            stack.api.inject(Fault(status=rng.choice([429, 500, 503, 409]), times=rng.randint(1, 3)))
        if rng.random() < 0.5:
            local.pump(max_rounds=5)
    for stack in local.regions.values():
        stack.api.faults.clear()
    local.pump()
    local.sweep()
    local.pump()
    records = {record.endpoint_name: record for record in store.list()}
    for region, stack in local.regions.items():
        wanted = {
            ObjectRef.of(obj).key: record.lifecycle_id
            for record in records.values()
            for obj in render(record, region)
        }
        held = {
            ObjectRef.of(obj).key: obj["metadata"]["annotations"][LIFECYCLE_ANNOTATION]
            for obj in stack.api.endpoint_objects()
        }
        assert held == wanted, f"seed {seed} region {region}"
    for record in records.values():
        assert not record.is_deleted, f"seed {seed}: {record.endpoint_name} deleted but not purged"
        for region in record.target_regions:
            status = record.region_status[region]
            assert status.state in ("running", "stopped")
            assert status.region_generation == record.region_generations[region]
