"""A model-based state machine of the fenced store, with writers that really are stale.

Actors keep the snapshots they read for the rest of the run, across memberships, deletions,
purges and new lifecycles of the same name, and write with them: operators (stop, start, spec,
scale, Regions, delete, label-fenced delete), Regional reconcilers (observation, removal and
deletion acknowledgements, with or without the lifecycle id), slow purgers (their read long
before their write), jobs sent to finish a lifecycle that ended meanwhile (they take the
successor's deletion generation but present their own lifecycle id), the reconciler of a Region
an older gco left a token for without making it a member, an older gco writing legacy records,
and back-fills. Writers run on hosts whose clocks disagree by an hour.

For every write an oracle computes from the record before it whether the write must land;
after every step the record is compared with the one before: a stale writer changed nothing,
a fresh one changed it, and `updated_at` only ever moved forward. The invariants of the record
(a deleted lifecycle never returns; every member Region is in the cleanup set; a purge only
after every deletion Region acknowledged) are checked after every step too.
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, multiple, rule

from gco.endpoints import EndpointExistsError, EndpointNotFoundError, EndpointStore, InvalidTransitionError
from gco.endpoints.codec import to_item
from gco.endpoints.record import EndpointRecord
from gco.endpoints.states import LIVE_STATES
from gco.endpoints.tokens import MonotonicClock

REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]
IMAGE = "vllm/vllm-openai:v1"
SPECS: dict[str, dict[str, Any]] = {
    "plain": {"image": IMAGE, "replicas": 1},
    "autoscaled": {
        "image": IMAGE,
        "autoscaling": {
            "enabled": True,
            "min_replicas": 1,
            "max_replicas": 3,
            "metrics": [{"type": "cpu", "target": 60.0}],
        },
    },
    "mooncake": {"image": IMAGE, "mooncake": {"mode": "store"}},
}
# Clock offsets of the hosts writers run on: one an hour behind, one an hour ahead.
SKEWS = (timedelta(0), timedelta(hours=-1), timedelta(hours=1))
UNREAD = "unread"
region_sets = st.lists(st.sampled_from(REGIONS), min_size=1, max_size=3, unique=True)


class Tally:
    """What one run did: steps, and writes by the kind of staleness they carried."""

    steps = 0
    kinds: ClassVar[Counter[str]] = Counter()

    @classmethod
    def reset(cls) -> None:
        cls.steps = 0
        cls.kinds = Counter()


class SlowReader(EndpointStore):
    """A store whose reads return what the actor read long ago (a purger delayed after its read)."""

    def __init__(self, base: EndpointStore, snapshot: EndpointRecord) -> None:
        super().__init__(base.client, base.table_name, clock=base.clock)
        self.snapshot = snapshot

    def get(self, name: str, consistent_read: bool = True) -> EndpointRecord | None:
        return self.snapshot


def skewed_store(base: EndpointStore, skew: timedelta) -> EndpointStore:
    clock = MonotonicClock(lambda: datetime.now(UTC) + skew)
    return EndpointStore(base.client, base.table_name, clock=clock)


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
        self.hosts = [skewed_store(self.store, skew) for skew in SKEWS]
        self.cached: EndpointRecord | str | None = UNREAD
        self.retired: list[tuple[EndpointRecord, str]] = []  # snapshots holding a rotated token
        self.legacy: list[EndpointRecord] = []  # snapshots of legacy records
        self.ended: list[EndpointRecord] = []  # snapshots of lifecycles that were purged

    # -- the harness of every write -------------------------------------------------------------

    def current(self) -> EndpointRecord | None:
        """The record now (a strongly consistent read). The machine is the only writer of its
        name, so the read after each write stands until the next one: the rules, the oracle and
        the invariants read it from here instead of asking the table again (most of a run's
        requests were these repeated reads)."""
        if isinstance(self.cached, str):
            self.cached = self.store.get(self.name, consistent_read=True)
        return self.cached

    def forget(self) -> None:
        """The record may have changed: the next `current()` reads it."""
        self.cached = UNREAD

    def snapshot(self) -> Any:
        record = self.current()
        if record is not None and record.is_legacy:
            self.legacy.append(record)
        return multiple() if record is None else record

    def host(self, index: int) -> EndpointStore:
        return self.hosts[index % len(self.hosts)]

    def write(self, kind: str, lands: bool, action: Callable[[], object]) -> None:
        """Run one write and compare the record before and after it with the oracle's verdict."""
        Tally.steps += 1
        Tally.kinds[kind if not lands else "fresh"] += 1
        before = self.current()
        self.forget()
        with contextlib.suppress(InvalidTransitionError, EndpointNotFoundError, EndpointExistsError):
            action()
        after = self.current()
        self.check(after)
        if not lands:
            assert after == before, f"a stale writer ({kind}) changed the record"
            return
        assert after != before, f"a fresh write ({kind}) did not land"
        if before is not None and after is not None:
            assert (after.updated_at or "") > (before.updated_at or ""), "updated_at did not move forward"

    @staticmethod
    def staleness(snapshot: EndpointRecord, before: EndpointRecord | None) -> str:
        """The kind of staleness a writer holding `snapshot` carries against `before`."""
        if before is None:
            return "purged"
        if before.lifecycle_id != snapshot.lifecycle_id:
            return "lifecycle"
        if before.updated_at != snapshot.updated_at:
            return "snapshot"
        return "state"

    # -- operators ------------------------------------------------------------------------------

    @initialize(target=snapshots, regions=region_sets)
    def first_create(self, regions: list[str]) -> Any:
        Tally.steps += 1
        self.forget()
        return self.store.create(self.name, SPECS["plain"], regions, labels={"owner": "a"})

    @rule(target=snapshots, regions=region_sets, owner=st.sampled_from(["a", "b"]))
    def operator_creates(self, regions: list[str], owner: str) -> Any:
        before = self.current()
        self.write(
            "exists",
            before is None,
            lambda: self.store.create(self.name, SPECS["plain"], regions, labels={"owner": owner}),
        )
        return self.snapshot()

    @rule(target=snapshots, stray=st.booleans())
    def older_gco_writes_a_legacy_record(self, stray: bool) -> Any:
        """An older gco creates a record without lifecycle fencing when the name is free."""
        Tally.steps += 1
        if self.current() is None:
            self.write_legacy(stray)
        return self.snapshot()

    def write_legacy(self, stray: bool) -> None:
        generations = {"ap-south-1": uuid.uuid4().hex * 2} if stray else {}
        item = {
            "endpoint_name": self.name,
            "desired_state": "running",
            "target_regions": ["us-east-1"],
            "spec": SPECS["plain"],
            "labels": {"owner": "a"},
            "updated_at": self.store.clock.now(),
            "region_generations": generations,
        }
        self.forget()
        self.store.client.put_item(
            TableName=self.store.table_name,
            Item=to_item(item),
            ConditionExpression="attribute_not_exists(endpoint_name)",
        )

    @rule(
        target=snapshots,
        regions=region_sets,
        legacy=st.sampled_from([False, False, False, True]),
        recreate=st.sampled_from([True, True, False]),
        then_stop=st.booleans(),
    )
    def lifecycle_turns_over(self, regions: list[str], legacy: bool, recreate: bool, then_stop: bool) -> Any:
        """Fresh actors end the lifecycle (delete, every acknowledgement, purge) and start the next
        one, so the snapshots held by everyone else go stale across lifecycles."""
        seen: list[EndpointRecord] = []
        record = self.current()
        if record is not None and record.is_legacy:
            legacy_record = record  # narrowed, for the lambda (`legacy` is the rule's argument)
            self.write("fresh", True, lambda: self.store.ensure_lifecycle_metadata(legacy_record))
            record = self.current()
        if record is not None and not record.is_deleted:
            self.write("fresh", True, lambda: self.store.update_desired_state(self.name, "deleted"))
            record = self.current()
        if record is not None:
            seen.append(record)
            for region in record.pending_deletion_regions():
                self.write(
                    "fresh",
                    True,
                    lambda region=region: self.store.region_writes.update_region_status(  # type: ignore[misc]
                        self.name, region, "deleted", expected_deletion_generation=record.deletion_generation
                    ),
                )
            done = self.current()
            assert done is not None
            seen.append(done)
            self.write(
                "fresh",
                True,
                lambda: self.store.region_writes.purge(
                    self.name, expected_deletion_generation=done.deletion_generation or ""
                ),
            )
            self.purged_lifecycles.add(done.lifecycle_id or "")
            self.ended.append(done)
        if not recreate:
            pass  # the name stays free: held snapshots now point at nothing
        elif legacy:
            self.write_legacy(stray=True)
        else:
            self.write(
                "fresh",
                True,
                lambda: self.store.create(self.name, SPECS["plain"], regions, labels={"owner": "a"}),
            )
        self.invariants_hold()
        fresh = self.current()
        if then_stop and fresh is not None and not fresh.is_legacy:
            lid = fresh.lifecycle_id or ""
            self.write(
                "fresh",
                True,
                lambda: self.store.update_desired_state(self.name, "stopped", expected_lifecycle_id=lid),
            )
            fresh = self.current()
        if fresh is not None and fresh.is_legacy:
            self.legacy.append(fresh)
        return multiple(*seen, *([fresh] if fresh else []))

    @rule(target=snapshots, region=st.sampled_from(REGIONS))
    def region_leaves_and_rejoins(self, region: str) -> Any:
        """A fresh operator removes a Region and adds it back: its token rotates, and the
        snapshots from its earlier membership go stale."""
        record = self.current()
        if record is None or record.is_legacy or record.is_deleted or record.target_regions == [region]:
            Tally.steps += 1
            return multiple()
        others = [r for r in record.target_regions if r != region]
        self.write(
            "fresh",
            True,
            lambda: self.store.update_target_regions(
                self.name,
                others,
                expected_lifecycle_id=record.lifecycle_id or "",
                expected_updated_at=record.updated_at or "",
            ),
        )
        left = self.current()
        assert left is not None
        self.write(
            "fresh",
            True,
            lambda: self.store.update_target_regions(
                self.name,
                [*others, region],
                expected_lifecycle_id=left.lifecycle_id or "",
                expected_updated_at=left.updated_at or "",
            ),
        )
        self.retired.append((record, region))
        # The reconciler that read the earlier membership writes only now.
        self.observe(record, region, removal=False, host=1)
        return multiple(record, left)

    @rule(target=snapshots, spec=st.sampled_from(sorted(SPECS)))
    def two_operators_update_from_one_read(self, spec: str) -> Any:
        """Both read the same record; the first spec change lands, the second is a lost update."""
        record = self.current()
        if record is None or record.is_legacy or record.is_deleted:
            Tally.steps += 1
            return multiple()
        for kind, lands in (("fresh", True), ("snapshot", False)):
            new = {**SPECS[spec], "image": f"{IMAGE}{uuid.uuid4().hex[:6]}"}
            self.write(
                kind,
                lands,
                lambda new=new: self.store.update_spec(  # type: ignore[misc]
                    self.name, new, record.lifecycle_id or "", record.updated_at
                ),
            )
        return record

    @rule(pick=st.integers(0, 10**6))
    def late_backfill(self, pick: int) -> None:
        """A back-fill planned from a legacy record's snapshot, run after the record moved on."""
        if not self.legacy:
            Tally.steps += 1
            return
        self.backfill(self.legacy[pick % len(self.legacy)])

    @rule(target=snapshots)
    def someone_reads(self) -> Any:
        Tally.steps += 1
        return self.snapshot()

    @rule(snapshot=snapshots)
    def backfill(self, snapshot: EndpointRecord) -> None:
        if not snapshot.is_legacy:
            return
        before = self.current()
        lands = (
            before is not None
            and before.is_legacy
            and snapshot.is_legacy
            and before.updated_at == snapshot.updated_at
        )
        kind = "legacy" if before is None or not before.is_legacy else self.staleness(snapshot, before)
        self.write(kind, lands, lambda: self.store.ensure_lifecycle_metadata(snapshot))

    @rule(
        snapshot=snapshots,
        action=st.sampled_from(["stop", "start", "delete", "scale", "spec", "spec-blind", "evidence"]),
        spec=st.sampled_from(sorted(SPECS)),
        host=st.integers(0, 2),
    )
    def operator_writes(self, snapshot: EndpointRecord, action: str, spec: str, host: int) -> None:
        if snapshot.is_legacy:
            return
        store = self.host(host)
        before = self.current()
        lid = snapshot.lifecycle_id or ""
        mine = before is not None and before.lifecycle_id == lid
        live = mine and before is not None and not before.is_deleted
        if action == "stop":
            lands = live
            act: Callable[[], object] = lambda: store.update_desired_state(  # noqa: E731
                self.name, "stopped", expected_lifecycle_id=lid
            )
        elif action == "start":
            lands = mine and before is not None and before.desired_state == "stopped"
            act = lambda: store.start(self.name, lid)  # noqa: E731
        elif action == "delete":
            lands = live
            act = lambda: store.update_desired_state(self.name, "deleted", expected_lifecycle_id=lid)  # noqa: E731
        elif action == "scale":
            lands = (
                mine
                and before is not None
                and before.desired_state in LIVE_STATES
                and before.spec.mooncake is None
                and not before.spec.autoscaled
            )
            act = lambda: store.scale(self.name, 3, lid)  # noqa: E731
        elif action == "evidence":  # a rollout names its evidence: fenced by its lifecycle alone
            evidence = hashlib.sha256(uuid.uuid4().bytes).hexdigest()
            lands = live
            act = lambda: store.set_rollout_evidence(self.name, evidence, lid)  # noqa: E731
        elif action == "spec-blind":  # fenced by the lifecycle alone, not by a snapshot
            blind = {**SPECS[spec], "image": f"{IMAGE}{uuid.uuid4().hex[:6]}"}
            lands = live
            act = lambda: store.update_spec(self.name, blind, lid)  # noqa: E731
        else:
            new = {**SPECS[spec], "image": f"{IMAGE}{uuid.uuid4().hex[:6]}"}
            lands = live and before is not None and before.updated_at == snapshot.updated_at
            act = lambda: store.update_spec(self.name, new, lid, snapshot.updated_at)  # noqa: E731
        self.write(self.staleness(snapshot, before), lands, act)

    @rule(
        target=snapshots,
        action=st.sampled_from(["stop", "start", "delete", "scale", "spec", "regions", "observe"]),
    )
    def a_write_races_a_delete(self, action: str) -> Any:
        """An operator or reconciler read the live record; a delete lands before its write."""
        record = self.current()
        if record is None or record.is_legacy or record.is_deleted:
            Tally.steps += 1
            return multiple()
        self.write("fresh", True, lambda: self.store.update_desired_state(self.name, "deleted"))
        lid = record.lifecycle_id or ""
        region = record.target_regions[0]
        late: dict[str, Callable[[], object]] = {
            "stop": lambda: self.store.update_desired_state(self.name, "stopped", expected_lifecycle_id=lid),
            "start": lambda: self.store.start(self.name, lid),
            "delete": lambda: self.store.update_desired_state(
                self.name, "deleted", expected_lifecycle_id=lid
            ),
            "scale": lambda: self.store.scale(self.name, 2, lid),
            "spec": lambda: self.store.update_spec(self.name, SPECS["plain"], lid),
            "regions": lambda: self.store.update_target_regions(
                self.name, REGIONS, expected_lifecycle_id=lid, expected_updated_at=record.updated_at or ""
            ),
            "observe": lambda: self.store.region_writes.update_region_status(
                self.name,
                region,
                "running",
                expected_lifecycle_id=lid,
                expected_region_generation=record.region_generations[region],
            ),
        }
        self.write("state", False, late[action])
        return record

    # -- races that are rare by chance: each rule sets one up and runs the late writer ----------

    @rule(target=snapshots, wrong_owner=st.booleans())
    def automation_acts_on_what_it_saw(self, wrong_owner: bool) -> Any:
        """Automation read the record; an operator stops it, or the label is not the automation's."""
        record = self.current()
        if record is None or record.is_legacy or record.is_deleted:
            Tally.steps += 1
            return multiple()
        if not wrong_owner:
            lid = record.lifecycle_id or ""
            self.write(
                "fresh",
                True,
                lambda: self.store.update_desired_state(self.name, "stopped", expected_lifecycle_id=lid),
            )
        owner = "b" if wrong_owner or record.labels.get("owner") != "a" else "a"
        moved = self.current()
        assert moved is not None
        kind = "label" if moved.labels.get("owner") != owner else "state"
        self.write(
            kind,
            kind == "state" and moved.desired_state == record.desired_state,
            lambda: self.store.update_desired_state(
                self.name,
                "deleted",
                expected_label=("owner", owner),
                expected_desired_state=record.desired_state,
            ),
        )
        return record

    @rule(
        pick=st.integers(0, 10**6),
        action=st.sampled_from(["start", "stop", "scale", "spec", "evidence", "observe"]),
    )
    def an_operator_of_an_ended_lifecycle(self, pick: int, action: str) -> None:
        """A writer that read a lifecycle which has ended since writes to its successor. When no
        lifecycle of this run has ended, or the current one is not live, fresh actors turn the
        lifecycle over first: the rule always has a successor to write to."""
        record = self.current()
        if not self.ended or record is None or record.is_legacy or record.is_deleted:
            self.lifecycle_turns_over(REGIONS[:2], legacy=False, recreate=True, then_stop=False)
            record = self.current()
        if not self.ended or record is None or record.is_legacy or record.is_deleted:
            Tally.steps += 1
            return
        old = self.ended[pick % len(self.ended)]
        if old.lifecycle_id == record.lifecycle_id:
            Tally.steps += 1
            return
        if action == "start" and record.desired_state != "stopped":
            lid = record.lifecycle_id or ""
            self.write(
                "fresh",
                True,
                lambda: self.store.update_desired_state(self.name, "stopped", expected_lifecycle_id=lid),
            )
        old_lid = old.lifecycle_id or ""
        region = record.target_regions[0]
        late: dict[str, Callable[[], object]] = {
            "start": lambda: self.store.start(self.name, old_lid),
            "stop": lambda: self.store.update_desired_state(
                self.name, "stopped", expected_lifecycle_id=old_lid
            ),
            "scale": lambda: self.store.scale(self.name, 2, old_lid),
            "spec": lambda: self.store.update_spec(self.name, SPECS["plain"], old_lid),
            "evidence": lambda: self.store.set_rollout_evidence(self.name, "e" * 64, old_lid),
            "observe": lambda: self.store.region_writes.update_region_status(
                self.name,
                region,
                "running",
                expected_lifecycle_id=old_lid,
                expected_region_generation=record.region_generations[region],
            ),
        }
        self.write("lifecycle", False, late[action])

    @rule(
        pick=st.integers(0, 10**6),
        action=st.sampled_from(["acknowledge", "purge", "slow-purge"]),
        host=st.integers(0, 2),
    )
    def a_job_of_an_ended_lifecycle_finishes_its_successor(self, pick: int, action: str, host: int) -> None:
        """A reconciler or cleanup job was sent to finish a lifecycle that has ended since; the
        name was re-created and that successor deleted meanwhile (fresh actors end a lifecycle
        first when none has ended, and delete the successor; for a purge, fresh reconcilers
        acknowledge every Region). The job reads the record, takes the deletion generation
        it finds there and writes fenced by the lifecycle it was sent for: the lifecycle fence
        alone must keep it from acknowledging or purging the successor. A slow purger instead
        purges with the ended lifecycle's own fully acknowledged read."""
        record = self.current()
        if not self.ended or (record is not None and record.is_legacy):
            self.lifecycle_turns_over(REGIONS[:2], legacy=False, recreate=True, then_stop=False)
            record = self.current()
        if not self.ended:
            Tally.steps += 1
            return
        old = self.ended[pick % len(self.ended)]
        old_lid = old.lifecycle_id or ""
        if record is not None and not record.is_deleted:
            self.write("fresh", True, lambda: self.store.update_desired_state(self.name, "deleted"))
            record = self.current()
        generation = (record if record is not None else old).deletion_generation or ""
        pending = record.pending_deletion_regions() if record is not None else []
        if action != "acknowledge":
            for region in pending:
                self.write(
                    "fresh",
                    True,
                    lambda region=region: self.store.region_writes.update_region_status(  # type: ignore[misc]
                        self.name, region, "deleted", expected_deletion_generation=generation
                    ),
                )
        kind = "purged" if record is None else "lifecycle"
        if action == "slow-purge":
            slow = SlowReader(self.host(host), old)
            self.write(
                "purged" if record is None else "slow_purge",
                False,
                lambda: slow.region_writes.purge(
                    self.name,
                    expected_deletion_generation=old.deletion_generation or "",
                    expected_lifecycle_id=old_lid,
                ),
            )
        elif action == "purge":
            self.write(
                kind,
                False,
                lambda: self.host(host).region_writes.purge(
                    self.name, expected_deletion_generation=generation, expected_lifecycle_id=old_lid
                ),
            )
        else:
            region = pending[0] if pending else (old.deletion_regions or REGIONS)[0]
            self.write(
                kind,
                False,
                lambda: self.host(host).region_writes.update_region_status(
                    self.name,
                    region,
                    "deleted",
                    expected_deletion_generation=generation,
                    expected_lifecycle_id=old_lid,
                ),
            )

    @rule(host=st.integers(0, 2), end=st.booleans())
    def a_region_that_is_no_member_reports(self, host: int, end: bool) -> None:
        """An older gco left a token for a Region it never made a target (`ap-south-1`); the
        back-fill keeps it, and that Region's reconciler reports with it. Lifecycle and token
        match, so only membership of the cleanup set keeps its status out. When the name is
        taken by a fenced lifecycle, fresh actors may end it first (`end`) to make room."""
        record = self.current()
        if record is not None and not record.is_legacy and end:
            self.lifecycle_turns_over(REGIONS[:1], legacy=True, recreate=True, then_stop=False)
            record = self.current()
        elif record is None:
            Tally.steps += 1
            self.write_legacy(stray=True)
            record = self.current()
        if record is not None and record.is_legacy:
            legacy = record
            self.write("fresh", True, lambda: self.store.ensure_lifecycle_metadata(legacy))
            record = self.current()
        if record is None or record.is_deleted:
            Tally.steps += 1
            return
        strays = sorted(set(record.region_generations) - set(record.cleanup_regions))
        if not strays:
            Tally.steps += 1
            return
        self.observe(record, strays[0], removal=False, host=host)

    @rule(spec=st.sampled_from(["autoscaled", "mooncake"]))
    def a_scale_races_a_spec_change(self, spec: str) -> None:
        """An operator scales what another just made autoscaled or mooncake."""
        record = self.current()
        if record is None or record.is_legacy or record.is_deleted:
            Tally.steps += 1
            return
        lid = record.lifecycle_id or ""
        self.write("fresh", True, lambda: self.store.update_spec(self.name, SPECS[spec], lid))
        self.write("state", False, lambda: self.store.scale(self.name, 2, lid))

    @rule()
    def an_older_gcos_record_is_deleted_by_name(self) -> None:
        """A plain delete must not land on a legacy record: its cleanup set is unknown."""
        if self.current() is None:
            Tally.steps += 1
            self.write_legacy(stray=False)
            self.check(self.current())
        before = self.current()
        if before is None or not before.is_legacy:
            return
        self.write("legacy", False, lambda: self.store.update_desired_state(self.name, "deleted"))

    @rule()
    def operator_deletes_by_name(self) -> None:
        """`gco inference delete NAME`: no fence but the record's own state."""
        before = self.current()
        lands = before is not None and not before.is_legacy and not before.is_deleted
        kind = "purged" if before is None else "legacy" if before.is_legacy else "state"
        self.write(kind, lands, lambda: self.store.update_desired_state(self.name, "deleted"))

    @rule(snapshot=snapshots, owner=st.sampled_from(["a", "b"]))
    def automation_deletes_by_label(self, snapshot: EndpointRecord, owner: str) -> None:
        """Delete fenced by an owner label and the desired state the automation last saw."""
        before = self.current()
        lands = (
            before is not None
            and not before.is_legacy
            and not before.is_deleted
            and before.labels.get("owner") == owner
            and before.desired_state == snapshot.desired_state
        )
        kind = "label" if before is not None and before.labels.get("owner") != owner else "state"
        self.write(
            kind if before is not None else "purged",
            lands,
            lambda: self.store.update_desired_state(
                self.name,
                "deleted",
                expected_label=("owner", owner),
                expected_desired_state=snapshot.desired_state,
            ),
        )

    @rule(snapshot=snapshots, regions=region_sets, host=st.integers(0, 2), fresh=st.booleans())
    def operator_moves_regions(
        self, snapshot: EndpointRecord, regions: list[str], host: int, fresh: bool
    ) -> None:
        """A membership change; a fresh operator reads first, so Regions leave and re-join often."""
        if fresh:
            snapshot = self.current() or snapshot
        if snapshot.is_legacy:
            return
        before = self.current()
        lands = (
            before is not None
            and before.lifecycle_id == snapshot.lifecycle_id
            and before.updated_at == snapshot.updated_at
            and not before.is_deleted
        )
        self.write(
            self.staleness(snapshot, before),
            lands,
            lambda: self.host(host).update_target_regions(
                self.name,
                regions,
                expected_lifecycle_id=snapshot.lifecycle_id or "",
                expected_updated_at=snapshot.updated_at or "",
            ),
        )

    # -- Regional reconcilers -------------------------------------------------------------------

    @rule(
        snapshot=snapshots,
        region=st.sampled_from([*REGIONS, "ap-south-1"]),
        removal=st.booleans(),
        host=st.integers(0, 2),
    )
    def reconciler_observes(self, snapshot: EndpointRecord, region: str, removal: bool, host: int) -> None:
        """An observation, or the acknowledgement of a Region's removal, under the snapshot's fences."""
        self.observe(snapshot, region, removal, host)

    @rule(pick=st.integers(0, 10**6), removal=st.booleans(), host=st.integers(0, 2))
    def reconciler_of_an_earlier_membership(self, pick: int, removal: bool, host: int) -> None:
        """A reconciler that read the record during a Region's earlier membership writes late."""
        if not self.retired:
            Tally.steps += 1
            return
        snapshot, region = self.retired[pick % len(self.retired)]
        self.observe(snapshot, region, removal, host)

    def observe(self, snapshot: EndpointRecord, region: str, removal: bool, host: int) -> None:
        token = snapshot.region_generations.get(region)
        if snapshot.is_legacy or token is None:
            return
        before = self.current()
        lands = (
            before is not None
            and before.lifecycle_id == snapshot.lifecycle_id
            and before.region_generations.get(region) == token
            and not before.is_deleted
            and region in before.cleanup_regions
        )
        if before is None or before.lifecycle_id != snapshot.lifecycle_id:
            kind = self.staleness(snapshot, before)
        elif before.region_generations.get(region) != token:
            kind = "region_token"
        elif region not in before.cleanup_regions:
            kind = "member"
        else:
            kind = "state"
        self.write(
            kind,
            lands,
            lambda: self.host(host).region_writes.update_region_status(
                self.name,
                region,
                "deleted" if removal else "running",
                replicas_ready=0 if removal else 1,
                details={"step": Tally.steps},
                expected_lifecycle_id=snapshot.lifecycle_id,
                expected_region_generation=token,
            ),
        )

    @rule(
        snapshot=snapshots,
        region=st.sampled_from(REGIONS),
        with_lifecycle=st.booleans(),
        host=st.integers(0, 2),
    )
    def reconciler_acknowledges_deletion(
        self, snapshot: EndpointRecord, region: str, with_lifecycle: bool, host: int
    ) -> None:
        generation = snapshot.deletion_generation
        if generation is None:
            return
        before = self.current()
        prior = before.region_status.get(region) if before is not None else None
        lands = (
            before is not None
            and before.is_deleted
            and before.deletion_generation == generation
            and region in (before.deletion_regions or [])
            and (prior is None or prior.deletion_generation != generation)
            and (not with_lifecycle or before.lifecycle_id == snapshot.lifecycle_id)
        )
        if before is None or before.lifecycle_id != snapshot.lifecycle_id:
            kind = self.staleness(snapshot, before)
        elif before.deletion_generation != generation:
            kind = "deletion_generation"
        else:
            kind = "state"
        self.write(
            kind,
            lands,
            lambda: self.host(host).region_writes.update_region_status(
                self.name,
                region,
                "deleted",
                expected_deletion_generation=generation,
                expected_lifecycle_id=snapshot.lifecycle_id if with_lifecycle else None,
            ),
        )

    @rule(region=st.sampled_from(REGIONS))
    def reconciler_catches_up(self, region: str) -> None:
        """A fresh reconciler: acknowledges its Region's deletion, so lifecycles end and restart."""
        record = self.current()
        if record is None or not record.is_deleted or record.deletion_generation is None:
            Tally.steps += 1
            return
        pending = record.pending_deletion_regions()
        self.write(
            "fresh",
            region in pending,
            lambda: self.store.region_writes.update_region_status(
                self.name, region, "deleted", expected_deletion_generation=record.deletion_generation
            ),
        )

    @rule(snapshot=snapshots, slow=st.booleans())
    def purger(self, snapshot: EndpointRecord, slow: bool) -> None:
        """Purge; a slow purger's read is the snapshot it took long ago."""
        generation = snapshot.deletion_generation
        if generation is None:
            return
        before = self.current()
        read = snapshot if slow else before
        lands = (
            before is not None
            and read is not None
            and before.is_deleted
            and before.deletion_generation == generation
            and read.deletion_generation == generation
            and read.is_deleted
            and not read.pending_deletion_regions()
            and before.lifecycle_id == snapshot.lifecycle_id
            and not before.pending_deletion_regions()
        )
        store = SlowReader(self.store, snapshot) if slow else self.store
        kind = "slow_purge" if slow and not lands else self.staleness(snapshot, before)
        self.write(
            kind,
            lands,
            lambda: store.region_writes.purge(
                self.name,
                expected_deletion_generation=generation,
                expected_lifecycle_id=snapshot.lifecycle_id,
            ),
        )
        if lands:
            self.purged_lifecycles.add(snapshot.lifecycle_id or "")

    # -- the invariants -------------------------------------------------------------------------

    @invariant()
    def invariants_hold(self) -> None:
        self.check(self.current())

    def check(self, record: EndpointRecord | None) -> None:
        """The record's invariants against what this machine saw of it before."""
        if record is None:
            if self.last is not None and not self.last.is_legacy:
                # Purged: only a deleted record whose every Region acknowledged, and every Region
                # that was ever a member of that lifecycle was among them.
                assert self.last.is_deleted, "a live record vanished"
                assert self.last.pending_deletion_regions() == []
                members = self.members_ever.get(self.last.lifecycle_id or "", set())
                assert members <= set(self.last.deletion_regions or [])
            self.last = None
            return
        if record.is_legacy:
            self.last = record
            return
        lid = record.lifecycle_id or ""
        assert lid not in self.purged_lifecycles, "a purged lifecycle came back"
        members = self.members_ever.setdefault(lid, set())
        members.update(record.target_regions)
        assert members <= set(record.cleanup_regions), "a member Region escaped the cleanup set"
        if record.is_deleted:
            self.deleted_lifecycles.add(lid)
            assert members <= set(record.deletion_regions or [])
        assert lid not in self.deleted_lifecycles or record.is_deleted, "a deleted lifecycle came back"
        self.last = record
