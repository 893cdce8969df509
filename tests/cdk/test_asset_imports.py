"""Every deployed function imports its handler from its own asset, in a clean interpreter.

The app is synthesized with its bundles' wheels installed from the locks, as `cdk deploy` ships it.
Each Python function of the assembly is then imported as Lambda would: a fresh interpreter (`-I -S`:
no site-packages, no PYTHONPATH, no user site), on its path only the function's asset folder and a
folder standing in for the runtime's own AWS SDK (tests/tools/lambda_runtime.py), with the template's
literal environment. The interpreter is the runtime's Python (`stacks.bundling.runtime_interpreter`:
3.13 from pyenv on the project's machines), so the bundle's wheels and its bytecode are the ones
Lambda loads. A machine without it builds the Regional bundle for its own Python from the same lock
and checks the two hold the same files but for the platform wheels' (test_..._on_this_python).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gco.local.assembly import CloudAssembly, LambdaFunction, functions
from stacks.bundling import REGIONAL, RUNTIME, python_version, runtime_interpreter
from tests.cdk.synth_cache import synthesize_deployed
from tests.conftest import SYNTH_GROUP
from tests.tools.lambda_runtime import bundle_for_this_python, runtime_sdk

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(SYNTH_GROUP)]

# What pip writes about the install itself rather than the wheel (stacks.bundling drops RECORD).
MACHINE_FILES = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
# Imports the handler and reports where every loaded module came from.
PROBE = """
import importlib, json, sys
asset, sdk, module, attribute = sys.argv[1:5]
sys.path[:0] = [asset, sdk]
handler = getattr(importlib.import_module(module), attribute)
exec(sys.argv[5])  # what the handler imports only when invoked
files = [getattr(m, "__file__", None) or "" for m in list(sys.modules.values())]
allowed = (asset, sdk, sys.base_prefix, sys.base_exec_prefix)
print(json.dumps({
    "callable": callable(handler),
    "python": "%d.%d" % sys.version_info[:2],
    "outside": sorted(f for f in files if f and not f.startswith(allowed)),
}))
"""


# Code a handler imports lazily, on its first invocation, run after the import: the rollout step's
# statistics (numpy, and scipy's distributions, from the slimmed wheels).
LAZY = {
    "rollout": "from gco.bench.analysis.stats import paired_ratio_ci; from gco.rollout.decision import "
    "sign_test_p; assert paired_ratio_ci([1.0, 2.0, 3.0], [1.1, 2.0, 3.2]).n == 3 and sign_test_p(3, 1) < 1",
}


@pytest.fixture(scope="module")
def deployed() -> list[LambdaFunction]:
    assembly = CloudAssembly.open(synthesize_deployed())
    found = [f for stack in assembly.stacks.values() for f in functions(stack).values()]
    return [f for f in found if f.is_python and f.code is not None]


@pytest.fixture(scope="module")
def sdk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return runtime_sdk(tmp_path_factory.mktemp("runtime-sdk"))


def literal_environment(function: LambdaFunction) -> dict[str, str]:
    """The template's variables that are plain strings (the rest name resources: resolved on deploy),
    with what Lambda itself sets."""
    literal = {k: v for k, v in function.environment.items() if isinstance(v, str)}
    return {
        **literal,
        "PATH": "/usr/bin:/bin",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "LAMBDA_TASK_ROOT": str(function.code),
        "_HANDLER": function.handler,
    }


def test_every_deployed_function_imports_from_its_asset_alone(
    deployed: list[LambdaFunction], sdk: Path
) -> None:
    interpreter = runtime_interpreter(RUNTIME)
    if interpreter is None:
        pytest.skip(f"no Python {python_version(RUNTIME)} here: test_..._on_this_python checks the bundle")
    ours = [f for f in deployed if f.runtime == RUNTIME.name]
    assert len(ours) >= 9  # stream, sweep and authorizer in two Regions; the rollout's step, give-up, starter
    for function in ours:
        assert function.code is not None
        done = subprocess.run(
            [interpreter, "-I", "-S", "-c", PROBE, str(function.code), str(sdk), function.handler_module,
             function.handler_attribute, LAZY.get(function.handler_module, "")],
            env=literal_environment(function), capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        where = f"{function.stack}/{function.logical_id} ({function.handler})"
        assert done.returncode == 0, f"{where}: {done.stderr[-2000:]}"
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["callable"], where
        assert report["python"] == python_version(RUNTIME)
        assert report["outside"] == [], (
            f"{where} loaded modules from outside its asset: {report['outside'][:5]}"
        )


def test_the_regional_bundle_on_this_python_holds_the_same_files(
    deployed: list[LambdaFunction], tmp_path: Path
) -> None:
    """Where the runtime's Python is missing, the import above cannot run; the same lock installed for
    this interpreter (what test_bundle_imports runs the handlers from) must then hold the deployed
    bundle's files but for its platform wheels' compiled extensions."""
    if sys.version_info[:2] == tuple(int(p) for p in python_version(RUNTIME).split(".")):
        pytest.skip("this interpreter is the runtime's Python: the import test covers the bundle")
    reconciler = next(f for f in deployed if f.handler == "reconciler.handler")
    assert reconciler.code is not None
    here = bundle_for_this_python(REGIONAL, tmp_path / "regional")
    shipped, local = bundle_files(reconciler.code), bundle_files(here)
    assert "reconciler.py" in shipped and "gco/reconcile/reconciler.py" in shipped
    assert {p for p in shipped if not extension(p)} == {p for p in local if not extension(p)}
    # the same extensions, built for another interpreter: `_pydantic_core.cpython-313-...so`
    assert len({p for p in shipped if extension(p)}) == len({p for p in local if extension(p)}) > 0


def bundle_files(root: Path) -> set[str]:
    """A bundle's files, without bytecode (shipped only for the runtime's Python) and pip's INSTALLER
    and REQUESTED markers."""
    return {
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.name not in MACHINE_FILES
    }


def extension(path: str) -> bool:
    """A compiled extension, whose name carries the interpreter's tag."""
    return path.endswith((".so", ".pyd"))
