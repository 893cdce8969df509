"""The local walk-through: a moto server, Regional reconcilers, and the `gco inference` commands.

Each step runs the real `gco` command in a subprocess against the local endpoint and prints the
command line and what it printed, so the transcript is exactly what a user would see.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gco import aws
from gco.endpoints import EndpointStore, default_table_name
from gco.env import HOME_REGION_ENV
from gco.local.motoserver import MotoServer
from gco.local.reconcilers import LocalReconcilers
from gco.reconcile.objects import ENDPOINT_LABEL, MANAGED_BY, MANAGER

DEMO_SPEC = """\
# A whole endpoint spec; command-line flags override its fields.
image: vllm/vllm-openai:v0.6.3
framework: vllm
model_id: HuggingFaceTB/SmolLM2-135M-Instruct
gpu_count: 1
replicas: 1
resources:
  requests: {cpu: "4", memory: 16Gi}
env:
  VLLM_LOGGING_LEVEL: INFO
"""


DEMO_REGIONS = ("us-east-1", "us-west-2", "eu-west-1")


class DemoStepError(RuntimeError):
    """A walk-through step exited with an unexpected status."""


def _run_gco(arguments: Sequence[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gco.cli", *arguments],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def cluster_summary(reconcilers: LocalReconcilers) -> list[str]:
    """One line per Region: the endpoint objects its (stand-in) cluster holds."""
    lines = []
    for region, local in reconcilers.regions.items():
        kinds = sorted(f"{obj['kind']}/{obj['metadata']['name']}" for obj in local.api.endpoint_objects())
        lines.append(f"  {region}: {', '.join(kinds) if kinds else '(no objects)'}")
    return lines


def shared_summary(reconcilers: LocalReconcilers) -> list[str]:
    """One line per Region: gco's shared objects there (namespaces, the inference proxy)."""
    lines = []
    for region, local in reconcilers.regions.items():
        shared = [
            f"{obj['kind']}/{obj['metadata']['name']}"
            for obj in local.api.objects()
            if (obj["metadata"].get("labels") or {}).get(MANAGED_BY) == MANAGER
            and ENDPOINT_LABEL not in obj["metadata"]["labels"]
        ]
        lines.append(f"  {region} shared: {', '.join(sorted(shared))}")
    return lines


def walkthrough(echo: Callable[[str], None] = print) -> None:
    """Run the walk-through against a fresh local moto server and Regional reconcilers, then stop both."""
    with MotoServer() as server, tempfile.TemporaryDirectory(prefix="gco-demo-") as scratch:
        spec_file = Path(scratch) / "demo-spec.yaml"
        spec_file.write_text(DEMO_SPEC, encoding="utf-8")
        env = {**os.environ, "AWS_ENDPOINT_URL": server.url, HOME_REGION_ENV: "us-east-1"}
        echo(f"# local AWS endpoint (moto server) on {server.url}; AWS_ENDPOINT_URL points gco at it")

        def step(title: str, *arguments: str, expect: int = 0) -> str:
            echo(f"\n# {title}\n$ gco {' '.join(arguments)}")
            result = _run_gco(arguments, env)
            for line in (result.stderr + result.stdout).rstrip().splitlines():
                echo(f"  {line}")
            if result.returncode != expect:
                raise DemoStepError(
                    f"gco {' '.join(arguments)} exited {result.returncode}, expected {expect}"
                )
            echo(f"  (exit {result.returncode})")
            return result.stdout

        step("create the endpoint table with its stream", "inference", "init-table")
        store = EndpointStore(aws.client("dynamodb", endpoint_url=server.url), default_table_name())
        reconcilers = LocalReconcilers(store, DEMO_REGIONS, endpoint_url=server.url, ready_delay=0.5)
        echo(
            f"# Regional reconcilers for {', '.join(DEMO_REGIONS)}: each reads the table's stream and "
            "applies to its own stand-in Kubernetes API on loopback, which allows only what the "
            "reconciler's RBAC grant allows"
        )
        for line in shared_summary(reconcilers):
            echo(line)
        with reconcilers.start(poll_interval=0.2, sweep_interval=5.0):
            _walk(step, echo, reconcilers, spec_file)
        refused = sum(len(local.api.forbidden) for local in reconcilers.regions.values())
        echo(f"\n# requests the stand-in clusters refused as outside the reconciler's grant: {refused}")
        if refused:
            raise DemoStepError(f"{refused} request(s) were outside the reconciler's grant")
        echo("\n# done: the reconcilers, the stand-in clusters and the local server are stopped")


def _walk(
    step: Callable[..., str], echo: Callable[[str], None], reconcilers: LocalReconcilers, spec_file: Path
) -> None:
    step(
        "deploy to two Regions from a spec file, overriding replicas, and wait until both run it",
        "inference",
        "deploy",
        "demo-chat",
        "--spec",
        str(spec_file),
        "--replicas",
        "2",
        "--region",
        "us-east-1",
        "--region",
        "us-west-2",
        "--label",
        "team=ml-platform",
        "--wait",
        "--timeout",
        "60",
    )
    echo("# what the reconcilers applied:")
    for line in cluster_summary(reconcilers):
        echo(line)
    step(
        "bad input is refused with one line naming the field; nothing is written",
        "inference",
        "deploy",
        "Bad_Name",
        "--image",
        "vllm/vllm-openai:v0.6.3",
        "--region",
        "us-east-1",
        expect=2,
    )
    step("list endpoints", "inference", "list")
    step("scale", "inference", "scale", "demo-chat", "--replicas", "3")
    step("stop (scale to zero, keep the record)", "inference", "stop", "demo-chat")
    step("start it again", "inference", "start", "demo-chat")
    step(
        "start refuses an endpoint that is not stopped, naming its state",
        "inference",
        "start",
        "demo-chat",
        expect=1,
    )
    step(
        "update one field of the spec (a new rollout)",
        "inference",
        "update",
        "demo-chat",
        "--image",
        "vllm/vllm-openai:v0.6.4",
    )
    step(
        "move from us-west-2 to eu-west-1 (us-west-2 stays in the cleanup set until it is cleaned)",
        "inference",
        "regions",
        "demo-chat",
        "--add",
        "eu-west-1",
        "--remove",
        "us-west-2",
    )
    _settle(reconcilers)
    echo("# after the move:")
    for line in cluster_summary(reconcilers):
        echo(line)
    record = json.loads(
        step("the record as scripts read it", "inference", "status", "demo-chat", "--output", "json")
    )
    step(
        "a stale writer with another lifecycle id changes nothing",
        "inference",
        "delete",
        "demo-chat",
        "--expected-lifecycle-id",
        "0" * 64,
        expect=1,
    )
    step(
        "delete, fenced by the lifecycle id automation holds; every Region ever used acknowledges, then "
        "the record is purged",
        "inference",
        "delete",
        "demo-chat",
        "--expected-lifecycle-id",
        record["lifecycle_id"],
        "--wait",
        "--timeout",
        "60",
    )
    echo("# after the purge:")
    for line in cluster_summary(reconcilers):
        echo(line)
    step("the record is gone", "inference", "status", "demo-chat", expect=1)


def _settle(reconcilers: LocalReconcilers, rounds: int = 40) -> None:
    """Let the reconcilers drain the stream (bounded)."""
    for _ in range(rounds):
        if reconcilers.pump(max_rounds=5) == 0:
            return
        time.sleep(0.1)
