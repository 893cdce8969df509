"""`gco local up` from the synthesized app against `--from-source`, in one run on one machine.

Measures, each in this process as the CLI runs it (`gco.local.stack.up`), each `up` followed by its
`down`:

1. the local synth of the app for the Regions into an empty assembly cache (`local_assembly`: the
   child `python -m stacks.local_synth`; the Lambda bundling's own cache is the machine's, so a
   bundle already built for these inputs is copied, as after any earlier synth of the same tree);
2. the same call again: a hit, the digest of the app's files and nothing more;
3. `up` from that assembly (roles made, IAM enforced, each Region's functions from their assets),
   until every part reports serving, then one endpoint deployed and `running` in every Region as
   the CLI waits for it (`gco inference deploy --wait`);
4. the same with `--from-source` (the source tree's reconciler in the Regions' processes).

It prints each figure and the ratios app/source for `up` and for the deploy, so the cost of running
what deploys is read against the peer measured beside it. Run it alone: a build or test beside it
moves its figures several-fold.

    .venv/bin/python benchmarks/local_up.py [--regions us-east-1,us-west-2] [--runs 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gco.local import stack
from gco.local.assembly.synth import local_assembly

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "vllm/vllm-openai:v0.6.3"


def timed_up(regions: list[str], state_dir: Path, assembly: Path | None) -> tuple[float, float]:
    """Seconds to `up`, and to deploy one endpoint to running in every Region; then `down`."""
    started = time.perf_counter()
    state = stack.up(regions, state_dir, assembly=assembly)
    up_s = time.perf_counter() - started
    try:
        env = {**os.environ, **stack.environment(state)}
        argv = [sys.executable, "-m", "gco.cli", "inference", "deploy", "bench", "--image", IMAGE]
        argv += [arg for region in regions for arg in ("--region", region)]
        argv += ["--wait", "--timeout", "120"]
        started = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True, cwd=ROOT)
        deploy_s = time.perf_counter() - started
    finally:
        stack.down(state_dir)
    return up_s, deploy_s


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--regions", default=",".join(stack.DEFAULT_REGIONS))
    parser.add_argument("--runs", type=int, default=2)
    options = parser.parse_args()
    regions = options.regions.split(",")
    with tempfile.TemporaryDirectory(prefix="gco-bench-up-") as scratch:
        cache = Path(scratch) / "assembly-cache"
        started = time.perf_counter()
        assembly = local_assembly(regions, regions[0], cache_root=cache)
        miss_s = time.perf_counter() - started
        started = time.perf_counter()
        local_assembly(regions, regions[0], cache_root=cache)
        hit_s = time.perf_counter() - started
        print(f"local synth for {', '.join(regions)}: miss {miss_s:.1f} s, hit {hit_s * 1000:.0f} ms")
        figures: dict[str, list[tuple[float, float]]] = {"app": [], "source": []}
        for run in range(options.runs):
            for kind, app in (("app", assembly), ("source", None)):
                state_dir = Path(scratch) / f"{kind}-{run}"
                figures[kind].append(timed_up(regions, state_dir, app))
                up_s, deploy_s = figures[kind][-1]
                print(f"run {run + 1} {kind:>6}: up {up_s:.1f} s, deploy to running {deploy_s:.1f} s")
    up = {kind: statistics.median(f[0] for f in runs) for kind, runs in figures.items()}
    deploy = {kind: statistics.median(f[1] for f in runs) for kind, runs in figures.items()}
    print(
        f"median up: app {up['app']:.1f} s, source {up['source']:.1f} s, "
        f"ratio {up['app'] / up['source']:.2f}x"
    )
    print(
        f"median deploy to running: app {deploy['app']:.1f} s, source {deploy['source']:.1f} s, "
        f"ratio {deploy['app'] / deploy['source']:.2f}x"
    )


if __name__ == "__main__":
    main()
