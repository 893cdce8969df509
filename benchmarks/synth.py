"""Whole-app synth, cold and warm: wall time, the share spent bundling the Lambda code, peak memory,
resources, nag findings and suppressions, and each Lambda bundle's unzipped size (with
`--bundle-dependencies`, the deployed size: stacks/bundle_size.py).

Each run synthesizes the app of cdk.json (home + the Regional Regions + runner, all five cdk-nag
packs) in a fresh child process, with the App `cdk synth` runs (`stacks.app.new_app`), so import
and jsii start-up are counted as `cdk synth` pays them. `--validation` turns CDK's built-in
template validation on (`CDK_VALIDATION=true`), which app.py leaves off (stacks/app.py says why).
A cold run starts with an empty Lambda bundle cache (stacks/bundling.py builds the bundle: copy,
pip with --bundle-dependencies, compile); a warm run finds the bundle of unchanged inputs in the
cache and copies it, as a synth after an edit outside the Lambda code does. Peak memory is the
largest resident set of the Python process and of the jsii Node process.

    .venv/bin/python benchmarks/synth.py [--runs 3] [--bundle-dependencies] [--validation]

No ratio against a peer is printed: the peer's synth is not part of this repository, and a figure
measured once elsewhere (on another day, under another load) is no baseline for this run's
numbers. Compare with a peer only by synthesizing it in the same run, on the same machine. Targets:
a warm synth of at most 8 s (half of the 16-19 s GCO upstream's synth took on the 2-core development
machine, measured outside this repository), at most 45 suppression entries of gco's own resources;
those of CDK's kubectl provider (which installs each Region's cluster add-ons) are printed apart.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Half of GCO upstream's 16-19 s synth on the same machine (see the docstring).
TARGET_SECONDS = 8.0

CHILD = """
import json, os, sys, time
start = time.perf_counter()
from stacks.app import VALIDATION_ENV, build_app, nag_findings, new_app
from stacks.bundling import BUNDLE_SECONDS, BUNDLE_SIZES
from stacks.config import parse_config
config = json.loads(open("cdk.json").read())["context"]["gco"]
config["bundle_dependencies"] = sys.argv[2] == "1"
app = new_app({**os.environ, VALIDATION_ENV: sys.argv[3]}, outdir=sys.argv[1])
gco = build_app(parse_config(config), app=app)
assembly = app.synth()
print(json.dumps({
    "seconds_in_process": time.perf_counter() - start,
    "bundling_seconds": sum(BUNDLE_SECONDS),
    "bundle_mib": {size.name: round(size.total / 2**20, 1) for size in BUNDLE_SIZES},
    "stacks": {s.stack_name: len(s.template.get("Resources", {})) for s in assembly.stacks},
    "findings": len(nag_findings(assembly)),
    "suppressions": len(gco.suppressions),
    "kubectl_provider_suppressions": sum("/KubectlProvider/" in item.path for item in gco.suppressions),
    "rule_ids": len({item.rule for item in gco.suppressions}),
}))
"""


def one_run(bundle: bool, cache: Path, validation: bool) -> dict[str, object]:
    env = {
        **os.environ,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "GCO_BUNDLE_CACHE": str(cache),
    }
    with tempfile.TemporaryDirectory(prefix="gco-synth-") as outdir:
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", CHILD, outdir, "1" if bundle else "0", "true" if validation else "false"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        seconds = time.perf_counter() - start
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    result["seconds"] = seconds
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--bundle-dependencies", action="store_true", help="Install Lambda wheels (needs PyPI)."
    )
    parser.add_argument(
        "--validation",
        action="store_true",
        help="Run CDK's built-in template validation (CDK_VALIDATION=true).",
    )
    args = parser.parse_args()
    bundle, validation = args.bundle_dependencies, args.validation
    with tempfile.TemporaryDirectory(prefix="gco-bundles-") as scratch:
        # Cold: a new, empty cache each run. Warm: one cache, filled by an unmeasured first run.
        cold = [one_run(bundle, Path(scratch) / f"cold-{i}", validation) for i in range(args.runs)]
        one_run(bundle, Path(scratch) / "warm", validation)
        runs = [one_run(bundle, Path(scratch) / "warm", validation) for _ in range(args.runs)]
    print(f"CDK's built-in template validation: {'on' if validation else 'off'}")
    for label, measured in (("cold", cold), ("warm", runs)):
        wall = statistics.median(float(r["seconds"]) for r in measured)  # type: ignore[arg-type]
        bundling = statistics.median(float(r["bundling_seconds"]) for r in measured)  # type: ignore[arg-type]
        print(
            f"{label} synth (median of {len(measured)}): {wall:.1f} s wall, bundling {bundling:.2f} s "
            f"({100 * bundling / wall:.0f}% of it)"
        )
    sizes: dict[str, float] = runs[-1]["bundle_mib"]  # type: ignore[assignment]
    print("bundles unzipped: " + ", ".join(f"{name} {mib:.1f} MiB" for name, mib in sorted(sizes.items())))
    # ru_maxrss of waited-for descendants: the largest of the Python and jsii Node processes (KiB on Linux).
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    last = runs[-1]
    stacks: dict[str, int] = last["stacks"]  # type: ignore[assignment]
    resources = sum(stacks.values())
    seconds = statistics.median(float(r["seconds"]) for r in runs)  # type: ignore[arg-type]
    print(
        f"whole-app synth, warm ({len(stacks)} stacks, {args.runs} runs, median): {seconds:.1f} s wall, "
        f"peak RSS {peak_mb:.0f} MB (largest process)"
    )
    for name, count in stacks.items():
        print(f"  {name:28s} {count:4d} resources")
    print(
        f"resources: {resources}; unsuppressed nag errors+warnings: {last['findings']}; "
        f"suppressions: {last['suppressions']} entries over {last['rule_ids']} rule ids "
        f"({last['kubectl_provider_suppressions']} of them on CDK's kubectl provider)"
    )
    own = int(last["suppressions"]) - int(last["kubectl_provider_suppressions"])  # type: ignore[call-overload]
    met = "met" if seconds <= TARGET_SECONDS else "MISSED"
    print(
        f"targets: warm synth at most {TARGET_SECONDS:.0f} s {met}; "
        f"at most 45 suppressions of gco's own resources: {own} {'met' if own <= 45 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
