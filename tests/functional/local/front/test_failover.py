"""The global address on the local stack: a constant stream of requests while a Region fails and
comes back, residency held while its Regions fail, revocation at once, keys refused as they should."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gco.endpoints import operations
from gco.global_access import keys
from gco.global_access.routing import REGION_HEADER
from gco.local.front.front import TRIED_HEADER
from gco.local.region import faults
from tests.functional.local.conftest import eventually
from tests.functional.local.front.conftest import Global
from tests.functional.local.test_engines import SPEC
from tests.unit.reconcile.records import EAST, WEST

STREAM = 20  # requests in each phase, one after another
GAP_S = 0.02


def phase(world: Global, name: str, count: int = STREAM) -> list[tuple[int, str, str]]:
    """`count` requests in a row: (status, answering Region, Regions tried first) of each."""
    seen = []
    for _ in range(count):
        reply = world.post(name)
        seen.append(
            (reply.status_code, reply.headers.get(REGION_HEADER, ""), reply.headers.get(TRIED_HEADER, ""))
        )
        time.sleep(GAP_S)
    return seen


@pytest.mark.slow
def test_requests_keep_being_answered_while_a_region_fails_and_returns(world: Global) -> None:
    world.deploy("smol", [EAST, WEST])
    before = phase(world, "smol")
    assert {status for status, _, _ in before} == {200}
    assert {region for _, region, _ in before} == {EAST}  # the nearest Region first
    world.clusters.fail_proxy(EAST)
    during = phase(world, "smol")
    assert {status for status, _, _ in during} == {200}, Counter(during)
    assert {region for _, region, _ in during} == {WEST}
    # Until the health checker judges the Region down, a request is retried from it; then none is.
    eventually(lambda: not world.health.healthy(EAST), "the health checker to judge us-east-1 down")
    assert all(tried == "" for _, _, tried in phase(world, "smol", 5))
    world.clusters.restore_proxy(EAST)
    eventually(lambda: world.post("smol").headers.get(REGION_HEADER) == EAST, "us-east-1 answering again")
    after = phase(world, "smol")
    assert {status for status, _, _ in after} == {200} and {r for _, r, _ in after} == {EAST}


def test_an_engines_404_is_answered_not_retried_in_every_region(world: Global) -> None:
    """A path the engine does not serve is its 404, the same in every Region: the caller gets it from
    the first Region, nothing tried elsewhere; a Region's proxy without the route is still passed over."""
    world.deploy("smol", [EAST, WEST])
    reply = world.post("smol", path="/v1/no-such-path")
    assert reply.status_code == 404
    assert (reply.headers.get(REGION_HEADER), reply.headers.get(TRIED_HEADER)) == (EAST, None)


def test_unready_replicas_move_the_requests(world: Global) -> None:
    world.deploy("smol", [EAST, WEST])
    world.clusters.fail_readiness(EAST, ["smol"])
    during = phase(world, "smol", 20)
    assert {status for status, _, _ in during} == {200}
    assert {region for _, region, _ in during} == {WEST}
    world.clusters.fail_readiness(EAST, ["smol"], failing=False)
    eventually(lambda: world.post("smol").headers.get(REGION_HEADER) == EAST, "us-east-1 ready again")


def test_a_resident_endpoint_is_never_served_elsewhere(world: Global) -> None:
    spec = {**SPEC, "residency": {"enabled": True, "regions": [WEST]}}
    world.deploy("resident", [EAST, WEST], spec)
    assert {region for _, region, _ in phase(world, "resident", 10)} == {WEST}
    world.clusters.fail_proxy(WEST)
    refused = phase(world, "resident", 10)
    assert all(status in (502, 503) and region in ("", WEST) for status, region, _ in refused), refused
    assert all(EAST not in tried for _, _, tried in refused)
    world.clusters.fail_readiness(WEST, ["resident"])
    world.clusters.restore_proxy(WEST)
    eventually(lambda: world.post("resident").status_code == 503, "a 503 from the unready resident Region")
    reply = world.post("resident")
    assert reply.headers.get(REGION_HEADER) in (None, WEST)
    world.clusters.fail_readiness(WEST, ["resident"], failing=False)
    eventually(lambda: world.post("resident").status_code == 200, "the resident Region serving again")
    assert world.post("resident").headers[REGION_HEADER] == WEST


def test_a_revoked_key_is_refused_at_once(world: Global) -> None:
    world.deploy("smol", [EAST])
    plaintext, record = keys.new_key("soon-gone", ["smol"], now=datetime.now(UTC))
    world.key_store.put(record)
    assert world.post("smol", plaintext).status_code == 200
    world.key_store.revoke(record.key_id, datetime.now(UTC))
    refused = world.post("smol", plaintext)
    assert refused.status_code == 401
    assert refused.json()["error"]["message"] == "the key was revoked"
    assert refused.headers["www-authenticate"].startswith("Bearer")


def test_keys_are_checked(world: Global) -> None:
    world.deploy("smol", [EAST])
    scoped, record = keys.new_key("other-only", ["other"], now=datetime.now(UTC))
    world.key_store.put(record)
    assert world.post("smol", scoped).status_code == 403
    unknown, _ = keys.new_key("never-stored", ["*"], now=datetime.now(UTC))
    assert world.post("smol", unknown).status_code == 401
    no_key = world.post("smol", "not-a-key")
    assert no_key.status_code == 401 and "not-a-key" not in no_key.text
    assert world.post("missing").status_code == 404


def test_a_stopped_endpoint_is_a_503_naming_why(world: Global) -> None:
    world.deploy("smol", [EAST])
    operations.stop(world.store, "smol")
    reply = world.post("smol")
    assert reply.status_code == 503
    assert reply.json()["error"]["message"] == "endpoint 'smol' is stopped"


def test_a_regions_process_follows_its_faults_file(world: Global, tmp_path: Path) -> None:
    world.deploy("smol", [EAST, WEST])
    state = tmp_path / "state"
    state.mkdir()
    faults.faults_path(state, EAST).write_text(faults.Faults(proxy_down=True).model_dump_json())
    now = faults.follow(world.clusters, EAST, state, faults.Faults())
    assert now == faults.Faults(proxy_down=True) == faults.read(faults.applied_path(state, EAST))
    assert world.post("smol").headers[REGION_HEADER] == WEST
    faults.faults_path(state, EAST).write_text(faults.Faults(unready=["smol"]).model_dump_json())
    now = faults.follow(world.clusters, EAST, state, now)  # the proxy back, smol's replicas unready
    assert faults.read(faults.applied_path(state, EAST)) == faults.Faults(unready=["smol"])
    assert world.post("smol").headers[REGION_HEADER] == WEST
    faults.faults_path(state, EAST).unlink()
    assert faults.follow(world.clusters, EAST, state, now) == faults.Faults()
    eventually(lambda: world.post("smol").headers.get(REGION_HEADER) == EAST, "us-east-1 serving again")
    faults.forget(state, EAST)
    assert not faults.applied_path(state, EAST).exists()
