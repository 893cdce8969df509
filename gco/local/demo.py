"""The local walk-through: a moto server, the endpoint table, and the `gco inference` commands.

Each step runs the real `gco` command in a subprocess against the local endpoint and prints the
command line and what it printed, so the transcript is exactly what a user would see.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from gco.local.motoserver import MotoServer

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


def walkthrough(echo: Callable[[str], None] = print) -> None:
    """Run the walk-through against a fresh local moto server, then stop it."""
    with MotoServer() as server, tempfile.TemporaryDirectory(prefix="gco-demo-") as scratch:
        spec_file = Path(scratch) / "demo-spec.yaml"
        spec_file.write_text(DEMO_SPEC, encoding="utf-8")
        env = {**os.environ, "AWS_ENDPOINT_URL": server.url, "DYNAMODB_REGION": "us-east-1"}
        echo(f"# local AWS endpoint (moto_server) on {server.url}; AWS_ENDPOINT_URL points gco at it")

        def step(title: str, *arguments: str, expect: int = 0) -> str:
            echo(f"\n# {title}\n$ gco {' '.join(arguments)}")
            result = _run_gco(arguments, env)
            for line in (result.stdout + result.stderr).rstrip().splitlines():
                echo(f"  {line}")
            if result.returncode != expect:
                raise DemoStepError(
                    f"gco {' '.join(arguments)} exited {result.returncode}, expected {expect}"
                )
            echo(f"  (exit {result.returncode})")
            return result.stdout

        step("create the endpoint table with its stream", "inference", "init-table")
        step(
            "deploy to two Regions from a spec file, overriding replicas",
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
        )
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
            "move from us-west-2 to eu-west-1 (us-west-2 stays in the cleanup set)",
            "inference",
            "regions",
            "demo-chat",
            "--add",
            "eu-west-1",
            "--remove",
            "us-west-2",
        )
        record = json.loads(
            step("the record as scripts read it", "inference", "status", "demo-chat", "--output", "json")
        )
        step(
            "delete, fenced by the lifecycle id automation holds",
            "inference",
            "delete",
            "demo-chat",
            "--expected-lifecycle-id",
            record["lifecycle_id"],
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
            "the deleted record waits for every Region's acknowledgement before its purge",
            "inference",
            "status",
            "demo-chat",
        )
        echo("\n# done: the local server is stopped and its state discarded")
