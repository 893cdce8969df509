"""What `list` and `status` say is what is known (issue 35, "False and stale status"): an observation
its reconciler no longer confirms is `stale`, `regions --add` and `deploy` of a Region with no live
reconciler warn, `deploying` reads as what it is, and a second `stop` writes nothing. Real SSM (moto) holds
the heartbeats, written as each Region's sweep writes them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from gco import aws
from gco.cli import main
from gco.endpoints import EndpointStore
from gco.endpoints.tokens import format_timestamp
from gco.reconcile.heartbeat import HeartbeatWriter, SsmParameters
from tests.functional.cli.test_hostile_input import IMAGE, Run, run

__all__ = ["run"]  # the fixture, imported to be used here

EAST, WEST = "us-east-1", "us-west-2"
EVERY = 5.0  # the local stack's sweep interval


def beat(run: Run, region: str, at: datetime) -> None:
    """The heartbeat of `region`'s reconciler, as its sweep at `at` wrote it."""
    ssm = aws.client("ssm", region=region, endpoint_url=run.server.url)
    writer = HeartbeatWriter(SsmParameters(ssm), run.store.table_name, EVERY, clock=lambda: at)
    assert writer.beat(region)


def running_in(store: EndpointStore, name: str, regions: list[str], seen: datetime | None = None) -> None:
    record = store.create(name, {"image": IMAGE}, regions)
    for region in regions:
        written = store.region_writes.update_region_status(
            name,
            region,
            "running",
            replicas_ready=1,
            replicas_desired=1,
            expected_lifecycle_id=record.lifecycle_id,
            expected_region_generation=record.region_generations[region],
        )
        assert written is not None
        if seen is not None:  # the observation as written at `seen` (the store stamps the time of the write)
            store.client.update_item(
                TableName=store.table_name,
                Key={"endpoint_name": {"S": name}},
                UpdateExpression="SET region_status.#r.last_sync = :at",
                ExpressionAttributeNames={"#r": region},
                ExpressionAttributeValues={":at": {"S": format_timestamp(seen)}},
            )


def test_a_killed_regions_observation_is_shown_stale(run: Run) -> None:
    """WEST's reconciler stopped beating two minutes ago (its process killed): what it last wrote is
    shown `stale`, not `running 1/1`; EAST, beating, is `running`."""
    now = datetime.now(UTC)
    running_in(run.store, "chat", [EAST, WEST], seen=now - timedelta(minutes=3))
    beat(run, EAST, now)
    beat(run, WEST, now - timedelta(minutes=2))
    listed = json.loads(run_out(run, "inference", "list", "-o", "json"))
    regions = listed[0]["observed"]["regions"]
    assert regions[EAST]["state"] == "running"
    assert regions[WEST]["state"] == "stale" and regions[WEST]["reason"].startswith(
        "last confirmed 2 min ago"
    )
    assert (
        listed[0]["observed"]["state"] == "degraded" and listed[0]["observed"]["reason"] == f"stale: {WEST}"
    )
    table = run_out(run, "inference", "status", "chat")
    assert "observed:      degraded 1/2 (stale: us-west-2)" in table
    assert next(line for line in table.splitlines() if line.startswith(WEST)).split()[3] == "stale"
    assert [
        r["endpoint_name"]
        for r in json.loads(run_out(run, "inference", "list", "--state", "stale", "-o", "json"))
    ] == []


def run_out(run: Run, *args: str) -> str:
    """The command's stdout (exit 0 asserted)."""
    run.capsys.readouterr()
    status = main([*args, "--endpoint-url", run.server.url, "--table", run.store.table_name])
    out, err = run.capsys.readouterr()
    assert status == 0, err
    return out


def test_regions_add_of_a_region_without_a_live_reconciler_warns(run: Run) -> None:
    now = datetime.now(UTC)
    running_in(run.store, "chat", [EAST])
    beat(run, EAST, now)
    status, err = run("inference", "regions", "chat", "--add", WEST)
    assert status == 0
    assert err == (
        f"warning: {WEST}: no live reconciler: no heartbeat was ever written; chat stays pending there "
        f"until a reconciler serves {WEST}, and a delete waits for it (gco inference regions chat "
        f"--remove {WEST})\n"
    )
    record = run.store.get("chat")
    assert record is not None and record.target_regions == [EAST, WEST]  # added all the same
    beat(run, "eu-west-1", now)
    status, err = run("inference", "regions", "chat", "--add", "eu-west-1")
    assert (status, err) == (0, "")  # a live reconciler: no warning


def test_deploy_to_a_region_gco_does_not_serve_warns(run: Run) -> None:
    """`deploy --region R` where no reconciler serves R (a stack without that Region) says so, as
    `regions --add` does, instead of exiting 0 in silence; a served Region gets no warning."""
    beat(run, EAST, datetime.now(UTC))
    status, err = run(
        "inference", "deploy", "chat", "--image", IMAGE, "--region", EAST, "--region", "eu-west-1"
    )
    assert status == 0
    assert err == (
        "warning: eu-west-1: no live reconciler: no heartbeat was ever written; chat stays pending there "
        "until a reconciler serves eu-west-1, and a delete waits for it (gco inference regions chat "
        "--remove eu-west-1)\n"
    )
    status, err = run("inference", "deploy", "served", "--image", IMAGE, "--region", EAST)
    assert (status, err) == (0, "")


def test_desired_state_deploying_on_a_running_endpoint_is_shown_as_running(run: Run) -> None:
    running_in(run.store, "chat", [EAST])
    beat(run, EAST, datetime.now(UTC))
    record = run.store.get("chat")
    assert record is not None and record.desired_state == "deploying"  # the stored value stays
    assert "desired_state: running (stored: deploying)" in run_out(run, "inference", "status", "chat")
    listed = run_out(run, "inference", "list")
    assert listed.splitlines()[1].split()[:3] == ["chat", "running", "running"]


def test_a_second_stop_writes_nothing(run: Run) -> None:
    run.store.create("chat", {"image": IMAGE}, [EAST])
    status, err = run("inference", "stop", "chat")
    assert status == 0, err
    before = run.items()
    status, err = run("inference", "stop", "chat")
    assert status == 0, err
    assert run.items() == before  # not even updated_at
