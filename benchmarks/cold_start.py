"""Cold import of each Lambda handler from the built bundle, as Lambda runs it, beside `import boto3`.

Each handler is measured in the bundle the project's bundling builds for its functions
(`stacks.bundling.BUNDLES`: the Regional functions' `REGIONAL`, the rollout workflow's `ROLLOUT`;
handlers, gco, the lock's wheels, bytecode compiled by the functions' Python:
`stacks.bundling.compile_bundle`), measured with that Python
(`stacks.bundling.runtime_interpreter`); on a machine without it, a bundle built for this
interpreter stands in (the lock's versions, this interpreter's wheels) and the header says so.
Each measurement is a fresh process started as Lambda starts one: isolated (`-I -S`, nothing on the
path but the bundle, a copy of the AWS SDK standing in for the runtime's, and the standard library),
no bytecode written (`-B`: Lambda's task root is read-only), Lambda's environment variables set (so
Powertools runs as in Lambda), and those the stack sets on the functions (`BUNDLE_ENVIRONMENT`); the
standard-library modules Lambda's runtime client imports before the handler are imported first and
not timed (`RUNTIME_PREIMPORTS`), as in Lambda, where the handler finds them loaded. The
figure is the handler module's import, timed inside the process as CPU time (what the import costs,
and what a quiet machine's wall clock shows) and as wall time (inflated by whatever else the machine
runs); the median of --runs rounds, each round one fresh process of every figure (interleaved, so a
drift of the machine's speed moves them alike), and each handler's ratio to the baseline as the
median of its per-round ratios. Printed beside it: the same bundle without bytecode (what a build
on a different Python ships) and `import boto3` alone, measured the same way in the same rounds,
as the baseline. Target: each handler under 300 ms with bytecode, and at most 1.3x `import boto3`.

    .venv/bin/python benchmarks/cold_start.py [--runs 7]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aws_cdk import aws_lambda as lambda_  # noqa: E402

from gco.env import AWS_REGION_ENV, DEFAULT_REGION_ENV  # noqa: E402
from stacks.bundling import (  # noqa: E402
    BUNDLE_ENVIRONMENT,
    BUNDLES,
    ROOT,
    RUNTIME,
    TASK_ROOT,
    Bundle,
    LocalPythonBundling,
    compile_bundle,
    pinned_versions,
    python_version,
    runtime_interpreter,
)

# Each handler module (a file of `lambdas/`, without `.py`) and the bundle it ships in.
HANDLERS = {handler.removesuffix(".py"): bundle for bundle in BUNDLES for handler in bundle.handlers}
TARGET_MS = 300.0
TARGET_RATIO = 1.3  # each handler with bytecode at most this many times `import boto3` (issue 39)
# The import names of what the Lambda Python runtime provides (stacks.bundling.RUNTIME_PROVIDED).
SDK_MODULES = ("boto3", "botocore", "s3transfer", "urllib3", "dateutil", "six")
THIS_RUNTIME = lambda_.Runtime(f"python3.{sys.version_info.minor}", lambda_.RuntimeFamily.PYTHON)
# The functions' Python when this machine has it, else this interpreter standing in for it.
RUNTIME_PYTHON = runtime_interpreter(RUNTIME)
MEASURED, INTERPRETER = (RUNTIME, RUNTIME_PYTHON) if RUNTIME_PYTHON else (THIS_RUNTIME, sys.executable)

# What the Lambda runtime interface client has imported from the standard library before it imports
# the handler (awslambdaric's bootstrap.py, lambda_runtime_client.py and lambda_runtime_marshaller.py:
# https://github.com/aws/aws-lambda-python-runtime-interface-client): the handler's import does
# not pay for these in Lambda, so the probe imports them first, untimed, for the baseline too.
RUNTIME_PREIMPORTS = (
    *("importlib", "json", "logging", "os", "time", "traceback"),  # bootstrap.py
    *("decimal", "math", "concurrent.futures"),  # the runtime client and its marshaller
)

PROBE = f"""
import json, sys, sysconfig, time
bundle, runtime, module = sys.argv[1:4]
stdlib = [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]]
sys.path[:] = [bundle, runtime, *[p for p in sys.path if p.startswith(tuple(stdlib))]]
for name in {RUNTIME_PREIMPORTS!r}:
    __import__(name)
start, cpu = time.perf_counter(), time.process_time()
__import__(module)
print(json.dumps({{"wall": (time.perf_counter() - start) * 1000, "cpu": (time.process_time() - cpu) * 1000}}))
"""


def build(scratch: Path, bundle: Bundle) -> tuple[Path, Path]:
    """The bundle with bytecode and the same without."""
    compiled = scratch / bundle.name
    compiled.mkdir()  # CDK hands the bundler an existing, empty directory
    # The functions' own bundle (the lock's wheels, their hashes checked) when their Python is here.
    wheels = MEASURED is RUNTIME
    bundling = LocalPythonBundling(bundle=bundle, install_dependencies=wheels, runtime=MEASURED)
    assert bundling.try_bundle(
        str(compiled),
        image=None,  # type: ignore[arg-type]
    )
    if MEASURED is not RUNTIME:
        pins = scratch / f"{bundle.name}-pins.txt"
        pins.write_text(pinned_versions(ROOT / bundle.lock))
        subprocess.run(
            [
                *(
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--no-compile",
                    "--target",
                    str(compiled),
                ),
                *("--only-binary=:all:", "--no-deps", "-r", str(pins)),
            ],
            check=True,
        )
        assert compile_bundle(compiled, MEASURED)
    source_only = scratch / f"{bundle.name}-source-only"
    shutil.copytree(compiled, source_only, ignore=shutil.ignore_patterns("__pycache__"))
    return compiled, source_only


def runtime_sdk(scratch: Path) -> Path:
    """The runtime's AWS SDK stand-in: a copy of this machine's, with bytecode."""
    runtime = scratch / "runtime"
    runtime.mkdir()
    for name in SDK_MODULES:
        source = Path(importlib.import_module(name).__file__ or "")
        if source.name == "__init__.py":
            shutil.copytree(source.parent, runtime / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, runtime / source.name)
    # The runtime's own packages are installed with their bytecode (pip compiles by default).
    subprocess.run([INTERPRETER, "-m", "compileall", "-q", "-j0", str(runtime)], check=True)
    return runtime


def cold_import_ms(module: str, bundle: Path, runtime: Path, probe: Path) -> dict[str, float]:
    """One fresh process importing `module` as Lambda would: CPU and wall milliseconds, timed inside it."""
    env = {
        "PATH": "/usr/bin:/bin",
        AWS_REGION_ENV: "us-east-1",
        DEFAULT_REGION_ENV: "us-east-1",
        "AWS_LAMBDA_FUNCTION_NAME": f"gco-{module}",
        "AWS_EXECUTION_ENV": f"AWS_Lambda_python{python_version(MEASURED)}",
        "LAMBDA_TASK_ROOT": TASK_ROOT,
        "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
        **BUNDLE_ENVIRONMENT,  # what the stack sets on the functions
    }
    done = subprocess.run(
        [INTERPRETER, "-I", "-S", "-B", str(probe), str(bundle), str(runtime), module],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def interleaved_ms(
    figures: dict[str, tuple[str, Path]], runtime: Path, probe: Path, runs: int
) -> dict[str, list[dict[str, float]]]:
    """`runs` fresh processes per figure (name -> (module, bundle)), one of each figure per round.

    Interleaved rather than one figure after another: on a machine whose speed drifts (another
    tenant, frequency scaling; here one figure moved by half between back-to-back runs) a drift
    then moves every figure of a round alike, and the per-round ratios to the baseline stay put.
    """
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in figures}
    for _ in range(runs):
        for name, (module, bundle) in figures.items():
            samples[name].append(cold_import_ms(module, bundle, runtime, probe))
    return samples


def median_of(samples: list[dict[str, float]], key: str) -> float:
    return statistics.median(sample[key] for sample in samples)


def ratio_to(samples: list[dict[str, float]], baseline: list[dict[str, float]]) -> float:
    """The median over rounds of the CPU time's ratio to the baseline's in the same round."""
    return statistics.median(s["cpu"] / b["cpu"] for s, b in zip(samples, baseline, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7, help="Fresh processes per figure (median).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gco-cold-") as scratch:
        built = {bundle.name: build(Path(scratch), bundle) for bundle in BUNDLES}
        runtime = runtime_sdk(Path(scratch))
        probe = Path(scratch) / "probe.py"
        probe.write_text(PROBE, encoding="utf-8")
        figures = {"boto3": ("boto3", built[BUNDLES[0].name][0])}
        for handler, bundle in HANDLERS.items():
            compiled, source_only = built[bundle.name]
            figures[handler] = (handler, compiled)
            figures[f"{handler} source"] = (handler, source_only)
        load = os.getloadavg()[0]
        samples = interleaved_ms(figures, runtime, probe, args.runs)
        python = python_version(MEASURED)
        stands_in = "" if MEASURED is RUNTIME else f", standing in for the functions' {RUNTIME.name}"
        print(
            f"cold import, Python {python}{stands_in}, median of {args.runs} rounds of fresh processes "
            f"(-I -S -B; bundle, runtime SDK, stdlib; one process of each figure a round); load average "
            f"{load:.1f} on {os.cpu_count()} CPUs"
        )
        base = samples["boto3"]
        print(
            f"  {'import boto3 (baseline)':24s} {median_of(base, 'cpu'):5.0f} ms CPU "
            f"{median_of(base, 'wall'):6.0f} ms wall"
        )
        for handler, bundle in HANDLERS.items():
            bundled, source = samples[handler], samples[f"{handler} source"]
            cpu, ratio = median_of(bundled, "cpu"), ratio_to(bundled, base)
            verdict = "met" if cpu < TARGET_MS and ratio <= TARGET_RATIO else "MISSED"
            print(
                f"  {handler + ' handler':24s} {cpu:5.0f} ms CPU {median_of(bundled, 'wall'):6.0f} ms wall "
                f"with bytecode ({ratio:.2f}x boto3; target < {TARGET_MS:.0f} ms and <= {TARGET_RATIO}x "
                f"{verdict}); source only: {median_of(source, 'cpu'):.0f} ms CPU "
                f"({ratio_to(source, base):.2f}x boto3); {bundle.name} bundle"
            )


if __name__ == "__main__":
    main()
