"""Concurrent actors against the moto server: the four invariants of SPEC section 2 after every step.

Operators, fresh and stale Regional reconcilers and purgers interleave; each actor acts on a
snapshot it read at some earlier step, which is what a slow or retried writer really holds.
At least 2,000 steps by default; GCO_STATEFUL_STEPS (or GCO_SOAK=1) asks for more.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from gco.endpoints import EndpointExistsError, EndpointNotFoundError, EndpointStore, InvalidTransitionError
from gco.endpoints.record import EndpointRecord
from tests.conftest import TABLE, soak_enabled

REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]
SPEC = {"image": "vllm/vllm-openai:v1", "replicas": 1}
STEPS_PER_EXAMPLE = 50
MIN_STEPS = int(os.environ.get("GCO_STATEFUL_STEPS", "20000" if soak_enabled() else "2000"))
region_sets = st.lists(st.sampled_from(REGIONS), min_size=1, max_size=3, unique=True)


class Counter:
    steps = 0


class FencedStoreMachine(RuleBasedStateMachine):
    store: EndpointStore
    snapshots = Bundle("snapshots")

    def __init__(self) -> None:
        super().__init__()
        self.name = f"ep-{uuid.uuid4().hex[:12]}"
        self.members_ever: dict[str, set[str]] = {}
        self.deleted_lifecycles: set[str] = set()
        self.purged_lifecycles: set[str] = set()
        self.last: EndpointRecord | None = None

    # -- helpers --------------------------------------------------------------------------------

    def current(self) -> EndpointRecord | None:
        return self.store.get(self.name, consistent_read=True)

    def snapshot(self) -> Any:
        """The current record as a new snapshot for later (possibly stale) writers."""
        record = self.current()
        return multiple() if record is None else record

    def expect_unchanged_if_stale(
        self, snapshot: EndpointRecord, before: EndpointRecord | None, stale: bool
    ) -> None:
        """A writer holding an old lifecycle id (or a gone record) changes nothing."""
        if stale:
            assert self.current() == before, f"stale writer of {snapshot.lifecycle_id} changed the record"

    def is_stale(self, snapshot: EndpointRecord, before: EndpointRecord | None) -> bool:
        return before is None or before.lifecycle_id != snapshot.lifecycle_id

    # -- actors ---------------------------------------------------------------------------------

    @initialize(target=snapshots, regions=region_sets)
    def first_create(self, regions: list[str]) -> Any:
        Counter.steps += 1
        return self.store.create(self.name, SPEC, regions, labels={"owner": "a"})

    @rule(target=snapshots, regions=region_sets)
    def operator_creates(self, regions: list[str]) -> Any:
        Counter.steps += 1
        try:
            return self.store.create(self.name, SPEC, regions, labels={"owner": "b"})
        except EndpointExistsError:
            return self.snapshot()

    @rule(target=snapshots)
    def someone_reads(self) -> Any:
        Counter.steps += 1
        return self.snapshot()

    @rule(
        snapshot=snapshots,
        action=st.sampled_from(["spec", "scale", "stop", "start", "delete", "delete-label"]),
    )
    def operator_writes(self, snapshot: EndpointRecord, action: str) -> None:
        Counter.steps += 1
        before = self.current()
        stale = self.is_stale(snapshot, before)
        lid = snapshot.lifecycle_id or ""
        try:
            if action == "spec":
                image = f"vllm/vllm-openai:v{uuid.uuid4().hex[:6]}"
                self.store.update_spec(self.name, {**SPEC, "image": image}, lid, snapshot.updated_at)
            elif action == "scale":
                self.store.scale(self.name, 3, lid)
            elif action == "stop":
                self.store.update_desired_state(self.name, "stopped", expected_lifecycle_id=lid)
            elif action == "start":
                self.store.start(self.name, expected_lifecycle_id=lid)
            elif action == "delete":
                self.store.update_desired_state(self.name, "deleted", expected_lifecycle_id=lid)
            else:
                self.store.update_desired_state(
                    self.name,
                    "deleted",
                    expected_label=("owner", "a"),
                    expected_desired_state=snapshot.desired_state,
                )
                stale = False  # not fenced by lifecycle: may delete whatever is labelled owner=a
        except (InvalidTransitionError, EndpointNotFoundError):
            assert self.current() == before
            return
        self.expect_unchanged_if_stale(snapshot, before, stale)

    @rule(snapshot=snapshots, regions=region_sets)
    def operator_moves_regions(self, snapshot: EndpointRecord, regions: list[str]) -> None:
        Counter.steps += 1
        before = self.current()
        stale = self.is_stale(snapshot, before) or before is None or before.updated_at != snapshot.updated_at
        try:
            self.store.update_target_regions(
                self.name,
                regions,
                expected_lifecycle_id=snapshot.lifecycle_id or "",
                expected_updated_at=snapshot.updated_at or "",
            )
        except (InvalidTransitionError, EndpointNotFoundError):
            assert self.current() == before
            return
        self.expect_unchanged_if_stale(snapshot, before, stale)

    @rule(snapshot=snapshots, region=st.sampled_from(REGIONS))
    def reconciler_observes(self, snapshot: EndpointRecord, region: str) -> None:
        Counter.steps += 1
        before = self.current()
        token = snapshot.region_generations.get(region)
        stale = (
            self.is_stale(snapshot, before)
            or before is None
            or before.region_generations.get(region) != token
            or before.is_deleted
        )
        written = (
            self.store.update_region_status(
                self.name,
                region,
                "running" if region in snapshot.target_regions else "deleted",
                replicas_ready=1,
                expected_lifecycle_id=snapshot.lifecycle_id,
                expected_region_generation=token,
            )
            if token
            else None
        )
        if stale:
            assert written is None
        self.expect_unchanged_if_stale(snapshot, before, stale)

    @rule(snapshot=snapshots, region=st.sampled_from(REGIONS))
    def reconciler_acknowledges_deletion(self, snapshot: EndpointRecord, region: str) -> None:
        Counter.steps += 1
        if snapshot.deletion_generation is None:
            return
        before = self.current()
        stale = before is None or before.deletion_generation != snapshot.deletion_generation
        written = self.store.update_region_status(
            self.name,
            region,
            "deleted",
            expected_deletion_generation=snapshot.deletion_generation,
            expected_lifecycle_id=snapshot.lifecycle_id,
        )
        if stale:
            assert written is None
        self.expect_unchanged_if_stale(snapshot, before, stale)

    @rule(snapshot=snapshots)
    def purger(self, snapshot: EndpointRecord) -> None:
        Counter.steps += 1
        before = self.current()
        purged = self.store.purge(
            self.name,
            expected_lifecycle_id=snapshot.lifecycle_id,
            expected_deletion_generation=snapshot.deletion_generation,
        )
        if before is not None and purged:
            assert before.lifecycle_id == snapshot.lifecycle_id
            assert before.pending_deletion_regions() == [], "purged before every Region acknowledged"
            self.purged_lifecycles.add(before.lifecycle_id or "")

    # -- the invariants -------------------------------------------------------------------------

    @invariant()
    def invariants_hold(self) -> None:
        if not hasattr(self, "store"):
            return
        record = self.current()
        if record is None:
            if self.last is not None:
                # Purged: only a deleted record whose every Region acknowledged, and every Region
                # that was ever a member of that lifecycle was among them.
                assert self.last.is_deleted
                assert self.last.pending_deletion_regions() == []
                members = self.members_ever.get(self.last.lifecycle_id or "", set())
                assert members <= set(self.last.deletion_regions or [])
            self.last = None
            return
        lid = record.lifecycle_id or ""
        assert lid not in self.purged_lifecycles, "a purged lifecycle came back"
        members = self.members_ever.setdefault(lid, set())
        members.update(record.target_regions)
        assert members <= set(record.cleanup_regions), "a member Region escaped the cleanup set"
        if record.is_deleted:
            self.deleted_lifecycles.add(lid)
            assert members <= set(record.deletion_regions or [])
        assert lid not in self.deleted_lifecycles or record.is_deleted, (
            "a deleted lifecycle came back to life"
        )
        self.last = record


def test_concurrent_actors_keep_the_invariants(store: EndpointStore) -> None:
    FencedStoreMachine.store = store
    Counter.steps = 0
    # Hypothesis picks each example's length, so run batches until the step budget is spent
    # (bounded: a batch always runs steps, and there are at most 4x the batches needed).
    for _ in range(4 * (MIN_STEPS // (20 * STEPS_PER_EXAMPLE) + 1)):
        run_state_machine_as_test(
            FencedStoreMachine,
            settings=settings(
                max_examples=20,
                stateful_step_count=STEPS_PER_EXAMPLE,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
        if Counter.steps >= MIN_STEPS:
            break
    print(f"stateful steps: {Counter.steps}")
    assert Counter.steps >= MIN_STEPS, f"only {Counter.steps} steps ran"
    assert store.table_name == TABLE
