"""The app synthesized for the local stack (gco.local.assembly.synth.local_assembly, running
`python -m stacks.local_synth`): one real synth per session into a cache of its own, then hits.

The assembly has the Regional stack of each asked Region and the global front door's authorizer; its
record names the interpreter the functions run with (the runtime's Python where this machine has it,
else the one running the tests, with bundles built for it); a handler imports from its asset with
that interpreter and nothing but the asset and the runtime's SDK on its path. A second call is a hit:
the same folder, no synth (its log untouched), in well under a second.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from gco.local.assembly import CloudAssembly, functions, synth
from gco.local.assembly.synth import LocalRecord, local_assembly
from gco.processes.cpython import FUNCTIONS_PYTHON
from tests.cdk.synth_cache import HOME, OTHER
from tests.conftest import SYNTH_GROUP
from tests.tools.lambda_runtime import runtime_sdk

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(SYNTH_GROUP)]
REGIONS = (HOME, OTHER)
# Run by the functions' interpreter with -I -S: the asset and the SDK first on the path, then the
# handler's module imported as Lambda's runtime imports it; where each module came from, as JSON.
IMPORT = """
import importlib, json, sys
sys.path[:0] = sys.argv[1:3]
handler = importlib.import_module(sys.argv[3])
import boto3, pydantic_core
print(json.dumps({
    "version": "%d.%d" % sys.version_info[:2],
    "handler": handler.__file__,
    "callable": callable(getattr(handler, sys.argv[4])),
    "pydantic_core": pydantic_core.__file__,
    "boto3": boto3.__file__,
    "path": sys.path,
}))
"""


@dataclass(frozen=True)
class Built:
    directory: Path
    cache: Path
    seconds: float


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    cache = tmp_path_factory.mktemp("assembly-cache")
    started = time.perf_counter()
    directory = local_assembly(REGIONS, HOME, cache_root=cache)
    return Built(directory, cache, time.perf_counter() - started)


def test_the_assembly_has_the_regional_stack_of_each_region_and_the_authorizer(built: Built) -> None:
    assembly = CloudAssembly.open(built.directory)
    assert {f"gco-regional-{region}" for region in REGIONS} | {"gco-global"} <= set(assembly.stacks)
    handlers = {f.handler for f in functions(assembly.stack(f"gco-regional-{HOME}")).values()}
    assert {"reconciler.handler", "sweep.handler", "authorizer.handler"} <= handlers
    assert built.directory.parent == built.cache
    print(f"cold build: {built.seconds:.1f} s")  # shown with -s


def test_the_record_names_an_interpreter_that_exists(built: Built) -> None:
    record = LocalRecord.read(built.directory)
    assert record.regions == REGIONS and record.home_region == HOME
    assert Path(record.python).is_file()
    version = subprocess.run(
        [record.python, "-I", "-S", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # the runtime's Python, or (only where this machine has none) the interpreter that ran the synth
    assert version == FUNCTIONS_PYTHON or record.python == sys.executable


def test_the_reconciler_imports_from_its_asset_alone_with_the_recorded_interpreter(
    built: Built, tmp_path: Path
) -> None:
    record = LocalRecord.read(built.directory)
    stack = CloudAssembly.open(built.directory).stack(f"gco-regional-{HOME}")
    (reconciler,) = [f for f in functions(stack).values() if f.handler == "reconciler.handler"]
    assert reconciler.code is not None and reconciler.code.is_relative_to(built.directory)
    sdk = runtime_sdk(tmp_path / "runtime")
    done = subprocess.run(
        [
            *(record.python, "-I", "-S", "-c", IMPORT),
            *(str(reconciler.code), str(sdk), reconciler.handler_module, reconciler.handler_attribute),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["callable"]
    assert Path(found["handler"]).parent == reconciler.code
    assert Path(found["pydantic_core"]).is_relative_to(reconciler.code)  # the compiled wheel of the bundle
    assert Path(found["boto3"]).is_relative_to(sdk)
    site = [p for p in found["path"] if "site-packages" in p or p.startswith(str(Path.cwd()))]
    assert found["path"][:2] == [str(reconciler.code), str(sdk)] and not site


def test_a_second_call_is_a_hit(built: Built, monkeypatch: pytest.MonkeyPatch) -> None:
    log = built.directory.with_name(built.directory.name + synth.LOG_SUFFIX)
    written = log.stat().st_mtime_ns

    def no_synth(*_: object) -> int:
        raise AssertionError("a hit synthesized again")

    monkeypatch.setattr(synth, "_run", no_synth)
    started = time.perf_counter()
    assert local_assembly(REGIONS, HOME, cache_root=built.cache) == built.directory
    seconds = time.perf_counter() - started
    assert log.stat().st_mtime_ns == written
    assert seconds < 1.0, f"a hit took {seconds:.2f} s"
    print(f"hit: {seconds * 1000:.0f} ms")
