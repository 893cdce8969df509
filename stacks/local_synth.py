"""The app synthesized for the local stack (`gco local up`), which runs its functions from their assets.

    python -m stacks.local_synth --out DIR --regions us-east-1,us-west-2 --home-region us-east-1

Built as app.py builds it (`new_app`, `build_app`, `parse_config`, cdk.json's context), the `gco`
context with these set:

- `regions` and `home_region`: the local stack's;
- `bundle_dependencies`: every bundle with its lock's wheels (the functions import them);
- `global_address`: an example zone (`LOCAL_GLOBAL_ADDRESS`, the tests' too), so the global API and
  its authorizer are synthesized. The synth never looks a zone up: it stays offline.

Where this machine has no Python of the Lambda runtime (`gco.processes.cpython.FUNCTIONS_PYTHON`),
the bundles are built for this interpreter instead (stacks/bundling.py's `BUNDLE_FOR_THIS_PYTHON_ENV`)
and the functions run on it. `DIR/gco-local.json` records which interpreter, and the Regions
(`gco.local.assembly.synth.LocalRecord`); it is written last, so its presence marks a whole synth.
`gco.local.assembly.synth.local_assembly` runs this module in a child process and keeps its output.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Before aws_cdk is imported (below), which otherwise warns on each synth that Node 20 is past its end
# of life
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from gco.local.assembly.synth import LocalRecord
from stacks.app import build_app, new_app
from stacks.bundling import BUNDLE_FOR_THIS_PYTHON_ENV, ROOT, RUNTIME, runtime_interpreter
from stacks.config import ConfigError, parse_config

# An example zone (docs/global.md), the one the tests synthesize (tests/cdk/synth_cache.py): the global
# API is synthesized with its custom domain and authorizer; nothing is looked up or deployed with it.
LOCAL_GLOBAL_ADDRESS = {
    "domain_name": "llm.example.com",
    "hosted_zone_id": "Z0123456789EXAMPLE",
    "hosted_zone_name": "example.com",
}


def local_context(regions: Sequence[str], home: str) -> dict[str, Any]:
    """cdk.json's context, its `gco` value set for the local stack (see the module's docstring)."""
    context: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
    gco = {
        **context["gco"],
        "regions": list(regions),
        "home_region": home,
        "bundle_dependencies": True,
        "global_address": LOCAL_GLOBAL_ADDRESS,
    }
    return {**context, "gco": gco}


def choose_python() -> str:
    """The interpreter the functions will run with: the runtime's Python where this machine has it;
    else this one, with the bundles built for it (the option set in this process's environment, which
    `stacks.bundling.lambda_code` reads, and cleared otherwise: an inherited one would not match)."""
    runtime_python = runtime_interpreter(RUNTIME)
    if runtime_python is not None:
        os.environ.pop(BUNDLE_FOR_THIS_PYTHON_ENV, None)
        return runtime_python
    os.environ[BUNDLE_FOR_THIS_PYTHON_ENV] = "1"
    return sys.executable


def synthesize(out: Path, regions: Sequence[str], home: str) -> LocalRecord:
    """Synthesize the app into `out` and record how its functions run there.

    Raises:
        ConfigError: the Regions or the home Region are not a valid configuration.
    """
    python = choose_python()
    context = local_context(regions, home)
    app = new_app(os.environ, outdir=str(out), context=context)
    build_app(parse_config(context["gco"]), app=app)
    app.synth()
    record = LocalRecord(python=python, regions=tuple(regions), home_region=home)
    record.write(out)
    return record


def main(argv: Sequence[str] | None = None) -> None:
    """The command line (see the module's docstring); a bad configuration exits in one line, as app.py."""
    parser = argparse.ArgumentParser(
        prog="python -m stacks.local_synth", description="Synthesize the app for the local stack."
    )
    parser.add_argument("--out", type=Path, required=True, help="the assembly's directory")
    parser.add_argument("--regions", required=True, help="comma-separated Regions of the local stack")
    parser.add_argument("--home-region", required=True, help="the home Region (one of --regions)")
    options = parser.parse_args(argv)
    regions = [region.strip() for region in options.regions.split(",") if region.strip()]
    try:
        record = synthesize(options.out, regions, options.home_region)
    except ConfigError as error:
        sys.exit(f"gco config error: {error}")
    print(f"gco local synth: {options.out} ({', '.join(regions)}; functions on {record.python})")


if __name__ == "__main__":
    main()
