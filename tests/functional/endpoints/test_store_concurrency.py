"""The fenced store under concurrent, stale writers: the model-based machine of `fencing_machine`.

Each run reports how many writes of each kind of staleness it made (a stale lifecycle, a
rotated Region token, an old deletion generation, an old snapshot, a gone record, a slow
purger's old read, a wrong label or state) and requires every kind to occur often: a stateful
test whose stale actors barely act proves little.

The clause weakenings this test is measured against (`make mutation-conditions` drops each
clause of the store's ConditionExpressions in turn and runs this machine; docs/fencing.md lists
what each clause stops and which removals are equivalent). The 27 of the fencing review:

     1 desired.lifecycle         10 live.not_deleted        19 status.member
     2 desired.expected_state    11 live.snapshot           20 ack.deleted
     3 desired.label             12 scale.lifecycle         21 ack.generation
     4 desired.not_deleted       13 scale.live              22 ack.member
     5 desired.fenced_record     14 scale.no_mooncake       23 ack.once
     6 start.stopped             15 scale.not_autoscaled    24 purge.deleted
     7 start.lifecycle           16 status.lifecycle        25 purge.generation
     8 live.lifecycle            17 status.region_generation 26 purge.regions
     9 live.not_deleted (update_target_regions shares live.*)  27 purge.acknowledged / purge.lifecycle

and the rest of the catalogue: create.absent, backfill.exists, backfill.legacy,
backfill.snapshot, desired.exists, start.exists, live.exists, scale.exists, status.exists,
status.not_deleted, ack.lifecycle, purge.lifecycle, purge.snapshot, clock.advances.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, seed, settings
from hypothesis.stateful import get_state_machine_test

from gco.endpoints import EndpointStore
from tests.conftest import TABLE, soak_enabled
from tests.functional.endpoints.fencing_machine import FencedStoreMachine, Tally

STEPS_PER_EXAMPLE = 50
SEED = 20261130
MIN_STEPS = int(os.environ.get("GCO_STATEFUL_STEPS", "20000" if soak_enabled() else "2000"))
# Each kind of stale write, with the share of steps it must at least reach in a run.
STALE_KINDS = {
    "lifecycle": 100,
    "region_token": 200,
    "snapshot": 200,
    "state": 200,
    "purged": 400,
    "slow_purge": 400,
    "label": 400,
    "legacy": 1000,
    "member": 200,
}


def run_machine(store: EndpointStore, min_steps: int, *, shrink: bool = True) -> None:
    """Run the machine until `min_steps` steps ran (bounded: at most 4x the batches needed)."""
    from hypothesis import Phase

    FencedStoreMachine.store = store
    Tally.reset()
    phases = list(Phase) if shrink else [Phase.generate]
    for batch in range(4 * (min_steps // (20 * STEPS_PER_EXAMPLE) + 1)):
        test = get_state_machine_test(
            FencedStoreMachine,
            settings=settings(
                max_examples=20,
                stateful_step_count=STEPS_PER_EXAMPLE,
                deadline=None,
                database=None,
                phases=phases,
                suppress_health_check=list(HealthCheck),
            ),
        )
        # A seed per batch: every run (here, in CI, under mutation) is the same sequence, so the
        # stale-write counts asserted below are a property of the machine, never of luck, while
        # the batches still differ from one another (Hypothesis' CI profile would otherwise
        # repeat one derandomized batch).
        seed(SEED + batch)(test)()
        if Tally.steps >= min_steps:
            break


def test_concurrent_stale_actors_change_nothing(store: EndpointStore) -> None:
    run_machine(store, MIN_STEPS)
    print(f"stateful steps: {Tally.steps}; writes by staleness: {dict(sorted(Tally.kinds.items()))}")
    assert Tally.steps >= MIN_STEPS, f"only {Tally.steps} steps ran"
    for kind, share in STALE_KINDS.items():
        assert Tally.kinds[kind] >= MIN_STEPS // share, f"too few stale writes of kind {kind}: {Tally.kinds}"
    assert Tally.kinds["fresh"] >= MIN_STEPS // 20
    assert store.table_name == TABLE
