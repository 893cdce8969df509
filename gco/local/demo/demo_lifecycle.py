"""The walk-through's lifecycle of an endpoint: the global address in front of it, then list, scale,
stop, start, update, move a Region, refuse a stale delete, delete and purge, each Region's objects
shown after the move and after the purge.

Its images run the fake engine (the rollout's, `demo_rollout.IMAGE_ARGS`), so it needs no CPU engine
and runs while a first `make demo` still compiles llama.cpp: what it shows is the record, the
reconcilers and the clusters, which are the same whatever engine a replica runs. On the CPU engine
every replica it starts would load the model (three a Region at its largest), minutes of a 2-core
machine's CPU with nothing more to show.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from gco.local.demo import demo_rollout
from gco.local.region.reconcilers import LocalReconcilers

ENDPOINT = "demo-ops"


def cluster_summary(reconcilers: LocalReconcilers) -> list[str]:
    """One line per Region: the endpoint objects its (stand-in) cluster holds."""
    lines = []
    for region, local in reconcilers.regions.items():
        kinds = sorted(f"{obj['kind']}/{obj['metadata']['name']}" for obj in local.api.endpoint_objects())
        lines.append(f"  {region}: {', '.join(kinds) if kinds else '(no objects)'}")
    return lines


def settle(reconcilers: LocalReconcilers, rounds: int = 40) -> None:
    """Let the reconcilers drain the stream (bounded)."""
    for _ in range(rounds):
        if reconcilers.pump(max_rounds=5) == 0:
            return
        time.sleep(0.1)


def lifecycle(
    step: Callable[..., str],
    echo: Callable[[str], None],
    reconcilers: LocalReconcilers,
    global_address: Callable[[str], None],
) -> None:
    """Deploy `ENDPOINT` to two Regions, call it through the global address (`global_address`, given
    the endpoint's name), then every lifecycle command on it, ending with its purge."""
    step(
        "an endpoint for the lifecycle commands (its images run the fake engine) in two Regions",
        *("inference", "deploy", ENDPOINT, "--image", demo_rollout.PRIMARY, "--model-id", "demo/ops"),
        *("--region", "us-east-1", "--region", "us-west-2", "--wait", "--timeout", "60"),
    )
    global_address(ENDPOINT)
    step("list endpoints", "inference", "list")
    step("scale", "inference", "scale", ENDPOINT, "--replicas", "3")
    step("stop (scale to zero, keep the record)", "inference", "stop", ENDPOINT)
    step("start it again", "inference", "start", ENDPOINT)
    step("start again: already started, nothing to do (as a second stop)", "inference", "start", ENDPOINT)
    step(
        "update one field of the spec (a new rollout)",
        *("inference", "update", ENDPOINT, "--image", demo_rollout.EQUAL),
    )
    step(
        "move from us-west-2 to eu-west-1 (us-west-2 stays in the cleanup set until it is cleaned)",
        *("inference", "regions", ENDPOINT, "--add", "eu-west-1", "--remove", "us-west-2"),
    )
    settle(reconcilers)
    echo("# after the move:")
    for line in cluster_summary(reconcilers):
        echo(line)
    record = json.loads(
        step("the record as scripts read it", "inference", "status", ENDPOINT, "--output", "json")
    )
    step(
        "a stale writer with another lifecycle id changes nothing",
        *("inference", "delete", ENDPOINT, "--expected-lifecycle-id", "0" * 64),
        expect=1,
    )
    step(
        "delete, fenced by the lifecycle id automation holds; every Region ever used acknowledges, then "
        "the record is purged",
        *("inference", "delete", ENDPOINT, "--expected-lifecycle-id", record["lifecycle_id"]),
        *("--wait", "--timeout", "60"),
    )
    echo("# after the purge:")
    for line in cluster_summary(reconcilers):
        echo(line)
    step("the record is gone", "inference", "status", ENDPOINT, expect=1)
