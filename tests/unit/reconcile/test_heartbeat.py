"""The reconciler's heartbeat, judged with an injected clock: when a reconciler counts as live, what
`deploy --wait` says of a Region without a live one, how often a wait reads the heartbeat again, and
a heartbeat write that fails without failing anything else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gco.cli.progress import HEARTBEAT_REREAD_S, ReconcilerWatch
from gco.reconcile.errors import HeartbeatError
from gco.reconcile.heartbeat import (
    STALE_SWEEPS,
    Heartbeat,
    HeartbeatWriter,
    Liveness,
    liveness,
    observation_stale,
    parameter_arn,
    parameter_name,
    read_heartbeat,
    stale_after,
)

T0 = datetime(2026, 12, 2, 6, 0, 0, tzinfo=UTC)
EVERY = 300.0


class Clock:
    """Now, moved by the test."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class MemoryParameters:
    """Stands in for one Region's Parameter Store (`Parameters`): a dict of name -> value; it models
    neither versions, types, nor SSM's name rules (tests/functional/reconcile/test_heartbeat.py
    covers those against the moto server). `fail` makes every put raise, as an unreachable SSM would."""

    def __init__(self, fail: bool = False) -> None:
        self.values: dict[str, str] = {}
        self.fail = fail

    def put(self, name: str, value: str) -> None:
        if self.fail:
            raise HeartbeatError(f"cannot write {name}: unreachable")
        self.values[name] = value

    def get(self, name: str) -> str | None:
        return self.values.get(name)


def test_the_parameter_is_named_by_table_and_region_and_its_arn_names_it_without_a_double_slash() -> None:
    assert parameter_name("gco-endpoints", "us-west-2") == "/gco/gco-endpoints/reconciler/us-west-2/heartbeat"
    arn = parameter_arn(partition="aws", region="us-west-2", account="123456789012", table="gco-endpoints")
    assert (
        arn == "arn:aws:ssm:us-west-2:123456789012:parameter/gco/gco-endpoints/reconciler/us-west-2/heartbeat"
    )


def test_a_heartbeat_within_three_sweeps_is_live_and_one_older_is_not() -> None:
    beat = Heartbeat(at=T0, every_s=EVERY)
    assert liveness(beat, T0 + timedelta(seconds=STALE_SWEEPS * EVERY)).live
    stale = liveness(beat, T0 + timedelta(seconds=STALE_SWEEPS * EVERY + 1))
    assert not stale.live
    assert stale.describe() == "no live reconciler: last heartbeat 2026-12-02T06:00:00Z, 15 min ago"
    assert liveness(beat, T0 + timedelta(seconds=20)).describe() == (
        "reconciler live: last heartbeat 2026-12-02T06:00:00Z, 20 s ago"
    )


def test_the_age_is_judged_by_the_writers_own_interval() -> None:
    fast = Heartbeat(at=T0, every_s=5.0)
    assert not liveness(fast, T0 + timedelta(seconds=16)).live
    assert liveness(Heartbeat(at=T0, every_s=EVERY), T0 + timedelta(seconds=16)).live


def test_no_heartbeat_is_no_live_reconciler_and_a_clock_behind_the_writer_is_age_zero() -> None:
    never = liveness(None, T0)
    assert not never.live
    assert never.describe() == "no live reconciler: no heartbeat was ever written"
    ahead = liveness(Heartbeat(at=T0 + timedelta(seconds=30), every_s=EVERY), T0)
    assert ahead == Liveness(ahead.heartbeat, 0.0) and ahead.live


def test_ages_read_in_the_unit_a_person_would_use() -> None:
    beat = Heartbeat(at=T0, every_s=1.0)
    said = [
        liveness(beat, T0 + timedelta(seconds=s)).describe().rsplit(", ", 1)[1] for s in (90, 7200, 86400 * 3)
    ]
    assert said == ["90 s ago", "2 h ago", "3 d ago"]


def test_the_writer_writes_what_the_reader_reads_and_a_failed_write_is_only_false() -> None:
    parameters = MemoryParameters()
    writer = HeartbeatWriter(parameters, "tbl", EVERY, clock=Clock(T0))
    assert read_heartbeat(parameters, "tbl", "us-east-1") is None
    assert writer.beat("us-east-1") is True
    assert read_heartbeat(parameters, "tbl", "us-east-1") == Heartbeat(at=T0, every_s=EVERY)
    assert read_heartbeat(parameters, "other-table", "us-east-1") is None
    assert HeartbeatWriter(MemoryParameters(fail=True), "tbl", EVERY).beat("us-east-1") is False


def test_a_parameter_that_holds_no_heartbeat_is_an_error_naming_it() -> None:
    parameters = MemoryParameters()
    parameters.values[parameter_name("tbl", "us-east-1")] = "yesterday"
    with pytest.raises(HeartbeatError, match="/gco/tbl/reconciler/us-east-1/heartbeat holds no heartbeat"):
        read_heartbeat(parameters, "tbl", "us-east-1")
    parameters.values[parameter_name("tbl", "us-east-1")] = '{"at": "2026-12-02T06:00:00", "every_s": 5}'
    with pytest.raises(HeartbeatError, match="timezone"):  # a time without its zone is no UTC time
        read_heartbeat(parameters, "tbl", "us-east-1")


def test_a_wait_reuses_a_live_heartbeat_for_one_sweep_interval_and_rereads_before_a_dead_verdict() -> None:
    reads: list[str] = []
    beats: dict[str, Heartbeat | None] = {"us-east-1": Heartbeat(at=T0, every_s=EVERY), "us-west-2": None}

    def read(region: str) -> Heartbeat | None:
        reads.append(region)
        return beats[region]

    clock = Clock(T0)
    watch = ReconcilerWatch(read, clock=clock)
    assert isinstance(first := watch.check("us-east-1"), Liveness) and first.live
    assert isinstance(never := watch.check("us-west-2"), Liveness) and never.heartbeat is None
    clock.now = T0 + timedelta(seconds=EVERY - 1)  # within one sweep interval: no newer beat can exist
    assert isinstance(watch.check("us-east-1"), Liveness) and reads == ["us-east-1", "us-west-2"]
    beats["us-west-2"] = Heartbeat(at=clock.now, every_s=EVERY)
    # "no heartbeat" is a verdict of no live reconciler: never given from a cached read
    assert isinstance(fresh := watch.check("us-west-2"), Liveness) and fresh.live
    assert reads == ["us-east-1", "us-west-2", "us-west-2"]
    clock.now = T0 + timedelta(seconds=STALE_SWEEPS * EVERY + 1)  # ages are judged at each call
    assert isinstance(late := watch.check("us-east-1"), Liveness) and not late.live
    assert reads[-1] == "us-east-1"  # read afresh before saying so


def test_heartbeat_reads_never_produce_a_false_no_live_reconciler() -> None:
    """The local stack sweeps every 5 s, so a heartbeat older than 3 x 5 s means no live reconciler.
    A watch that kept a read 15 s (the old reuse interval) judged a 4 s old heartbeat 16 s later as
    19 s old: "no live reconciler" on a healthy stack. Now no verdict comes from a stale read."""
    every = 5.0
    clock = Clock(T0)

    def read(region: str) -> Heartbeat | None:  # a reconciler beating every 5 s, on time
        elapsed = (clock.now - T0).total_seconds()
        return Heartbeat(at=T0 + timedelta(seconds=every * (elapsed // every) - 4), every_s=every)

    watch = ReconcilerWatch(read, clock=clock)
    for second in range(120):
        clock.now = T0 + timedelta(seconds=second)
        verdict = watch.check("us-east-1")
        assert isinstance(verdict, Liveness), verdict
        assert verdict.live, (second, verdict.describe())


def test_an_unreadable_heartbeat_is_asked_again_only_after_the_reread_interval() -> None:
    reads: list[str] = []

    def read(region: str) -> Heartbeat | None:
        reads.append(region)
        raise HeartbeatError("AccessDeniedException")

    clock = Clock(T0)
    watch = ReconcilerWatch(read, clock=clock)
    watch.check("us-east-1")
    clock.now = T0 + timedelta(seconds=HEARTBEAT_REREAD_S - 1)
    assert isinstance(watch.check("us-east-1"), HeartbeatError) and reads == ["us-east-1"]
    clock.now = T0 + timedelta(seconds=HEARTBEAT_REREAD_S)
    watch.check("us-east-1")
    assert reads == ["us-east-1", "us-east-1"]


def test_an_observation_is_stale_past_the_bound_of_its_reconcilers_sweeps() -> None:
    beat = Heartbeat(at=T0, every_s=EVERY)
    bound = stale_after(beat)
    assert bound == STALE_SWEEPS * EVERY
    assert observation_stale(T0, beat, T0 + timedelta(seconds=bound)) is None
    late = observation_stale(T0 - timedelta(hours=1), beat, T0 + timedelta(seconds=bound + 1))
    assert late == "last confirmed 15 min ago; its reconciler's last heartbeat 2026-12-02T06:00:00Z"
    # a write after the last heartbeat is fresh on its own; no heartbeat at all: nothing to judge by
    assert observation_stale(T0 + timedelta(seconds=bound), beat, T0 + timedelta(seconds=bound + 1)) is None
    assert observation_stale(T0, None, T0 + timedelta(days=1)) is None


def test_a_heartbeat_that_cannot_be_read_is_reported_as_such_not_as_a_dead_reconciler() -> None:
    def read(region: str) -> Heartbeat | None:
        raise HeartbeatError(f"cannot read the heartbeat of {region}: AccessDeniedException")

    checked = ReconcilerWatch(read, clock=Clock(T0)).check("us-west-2")
    assert isinstance(checked, HeartbeatError) and "AccessDeniedException" in str(checked)


def test_what_a_pending_regions_hint_says_with_and_without_a_live_reconciler() -> None:
    from gco.cli.progress import SILENT_REGION_S, _hint

    clock = Clock(T0 + timedelta(seconds=20))
    live = ReconcilerWatch(lambda region: Heartbeat(at=T0, every_s=EVERY), clock=clock)
    never = ReconcilerWatch(lambda region: None, clock=clock)

    def unreadable(region: str) -> Heartbeat | None:
        raise HeartbeatError("cannot read it: AccessDeniedException")

    assert _hint("e", "us-west-2", False, None, live) == ""
    assert (
        _hint("e", "us-west-2", False, None, never) == " (no live reconciler: no heartbeat was ever written)"
    )
    assert _hint("e", "us-west-2", True, lambda r: True, live) == (
        " (reconciler live: last heartbeat 2026-12-02T06:00:00Z, 20 s ago, but it has written nothing for"
        f" this endpoint in {SILENT_REGION_S:g} s)"
    )
    assert _hint("e", "us-west-2", True, lambda r: False, never).startswith(" (no stack serves us-west-2")
    assert _hint("e", "us-west-2", True, None, ReconcilerWatch(unreadable, clock=clock)).endswith(
        "is its Regional stack deployed?; its heartbeat cannot be read: cannot read it: "
        "AccessDeniedException)"
    )
    assert _hint("e", "us-west-2", False, None, ReconcilerWatch(unreadable, clock=clock)) == ""
