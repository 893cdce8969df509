"""The walk-through's rollouts: a build promoted Region by Region by a paired comparison, one half again
as slow rolled back in the first Region, each with its evidence's report page (`docs/rollout.md`).

The rollout endpoint's images run the fake engine at known speeds whatever the demo's engine (the
engine table's per-image knob, `gco.local.region.engines`), so the slower build is slower by design.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from gco.local.errors import DemoStepError

# An endpoint whose images run the fake engine at known speeds, whatever the
# demo's engine (the engine table's per-image knob, `gco.local.region.engines`): a build of equal
# speed is promoted Region by Region, one half again as slow is rolled back in the first Region.
ENDPOINT = "demo-rollout"
PRIMARY = "registry.example.com/chat:1.0"
EQUAL = "registry.example.com/chat:1.1"
SLOWER = "registry.example.com/chat:1.2"
# 100 ms to the first token, then 16 tokens 3 ms apart: about 0.15 s a request (32 a Region at the
# fewest blocks), still many times the loopback proxy's own few milliseconds. The slower build is half
# again as slow in both (150 ms, 4.5 ms): on a quiet machine one 20% slower was rolled back at the
# fewest blocks (TTFT ratio 1.163 [1.135, 1.208], docs/benchmarks.md), but on a 2-core machine under a
# parallel test run its intervals still straddled the 1.05 the rollback needs after 20 blocks
# (inconclusive): the load's delays, added to both versions alike, pull the measured ratio toward 1.
SPEED = ("--ttft-ms", "100", "--itl-ms", "3")
IMAGE_ARGS = {
    PRIMARY: SPEED,
    EQUAL: SPEED,
    SLOWER: ("--ttft-ms", "150", "--itl-ms", "4.5"),
}
# Four requests to each version a block (the default is eight): the same paired comparison on half
# the requests, so each look's interval is wider and, where the machine is noisy, more blocks are
# taken before a verdict (up to --max-blocks); a quiet machine decides both rollouts at the fewest (4).
BLOCK_REQUESTS = 4
TOLERANCE = "0.3"  # the loopback's noise on a small shared machine (docs/rollout.md)


def rollouts(step: Callable[..., str], echo: Callable[[str], None], rollout_dir: Path) -> None:
    """One build promoted Region by Region by a paired comparison, one half again as slow rolled back, and the
    rollout evidence's report page.

    Raises:
        DemoStepError: a rollout printed no report page, or the page is not a file.
    """
    shutil.rmtree(rollout_dir, ignore_errors=True)
    step(
        "an endpoint for rollouts (its images run the fake engine at known speeds) in two Regions",
        *("inference", "deploy", ENDPOINT, "--image", PRIMARY, "--model-id", "demo/chat"),
        *("--region", "us-east-1", "--region", "us-west-2", "--wait", "--timeout", "60"),
    )
    echo(
        f"  ... each block: {BLOCK_REQUESTS} requests to each version, pinned by name (X-Gco-Version), "
        "in ABBA order"
    )
    output = step(
        "roll out a build of equal speed, Region by Region: promoted when the paired interval allows",
        *("inference", "rollout", ENDPOINT, "--image", EQUAL, "--regions-in-waves"),
        *("--block-requests", str(BLOCK_REQUESTS)),
        *("--tolerance", TOLERANCE, "--run-dir", str(rollout_dir / "promoted")),
    )
    _page(echo, output)
    output = step(
        "roll out a build half again as slow: rolled back in the first Region, the second never touched",
        *("inference", "rollout", ENDPOINT, "--image", SLOWER, "--regions-in-waves"),
        *("--block-requests", str(BLOCK_REQUESTS)),
        *("--run-dir", str(rollout_dir / "rolled-back")),
        expect=1,
    )
    page = _page(echo, output)
    step("the rolled-back rollout's evidence validates against its schema and digest", "bench", "report",
         str(page.with_suffix(".json")))  # fmt: skip
    step("the record names the last rollout's evidence", "inference", "status", ENDPOINT, "-o", "json")
    step("delete the rollout endpoint", "inference", "delete", ENDPOINT, "--wait", "--timeout", "60")


def _page(echo: Callable[[str], None], output: str) -> Path:
    found = next(
        (line.split(": ", 1)[1] for line in output.splitlines() if line.startswith("report page: ")), None
    )
    if found is None or not Path(found).is_file():
        raise DemoStepError("gco inference rollout wrote no report page")
    echo(f"# the rollout's report page: {found}")
    return Path(found)
