"""Lambda code bundled locally (no Docker): handlers and the gco modules they import, nothing else.

The wheels are chosen for the functions' runtime and architecture; test_bundling_install.py installs them.
"""

from __future__ import annotations

import importlib.util
import marshal
import modulefinder
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk
import pytest
from aws_cdk import aws_lambda as lambda_

import stacks.bundling as bundling_module
from gco.processes.cpython import BUNDLE_PYTHON_ENV, FUNCTIONS_PYTHON
from stacks.bundling import (
    ARCHITECTURE,
    BUNDLE_FOR_THIS_PYTHON_ENV,
    BUNDLES,
    LAMBDA_REQUIREMENTS,
    LOCK,
    REGIONAL,
    REGIONAL_REQUIREMENTS,
    ROLLOUT,
    ROOT,
    RUNTIME,
    Bundle,
    LocalPythonBundling,
    compile_bundle,
    for_this_python,
    lambda_code,
    manylinux_platforms,
    pinned_versions,
    pip_install_command,
    python_version,
    runtime_interpreter,
    this_python_install_command,
    this_python_tag,
    uv_install_command,
)
from stacks.handler_imports import handler_modules
from tests.cdk.conftest import HOME, OTHER, Synthesized

# A Lambda runtime whose Python is the interpreter running the tests, and one no machine has.
THIS_PYTHON = lambda_.Runtime(f"python3.{sys.version_info.minor}", lambda_.RuntimeFamily.PYTHON)
# An old one: constructing a Runtime registers it in CDK's list of all runtimes, and cdk-nag's
# latest-runtime rule (AwsSolutions-L1) would then hold every real function to a future Python.
OTHER_PYTHON = lambda_.Runtime("python3.1", lambda_.RuntimeFamily.PYTHON)


def imported_by_handlers(handlers: tuple[str, ...]) -> set[str]:
    """The `gco` modules the `handlers` (files of lambdas/) import, found by the standard library's
    `modulefinder` (which follows the compiled code's imports, those inside functions too), as files
    relative to the root."""
    finder = modulefinder.ModuleFinder(path=[str(ROOT)])  # only the project: third parties are not followed
    for handler in sorted(handlers):
        finder.run_script(str(ROOT / "lambdas" / handler))
    files = {name: module_file(module) for name, module in finder.modules.items()}
    return {
        str(Path(file).relative_to(ROOT))
        for name, file in files.items()
        if name.split(".")[0] == "gco" and file
    }


def module_file(module: modulefinder.Module) -> str | None:
    """The file modulefinder found a module in (typeshed's `Module` leaves `__file__` undeclared)."""
    file: str | None = vars(module)["__file__"]
    return file


def test_local_bundling_copies_handlers_and_library(tmp_path: Path) -> None:
    regional, rollout = tmp_path / "regional", tmp_path / "rollout"
    for bundle, out in ((REGIONAL, regional), (ROLLOUT, rollout)):
        bundling = LocalPythonBundling(bundle=bundle, install_dependencies=False, runtime=OTHER_PYTHON)
        assert bundling.try_bundle(str(out), image=None)  # type: ignore[arg-type]
        assert sorted(path.name for path in out.glob("*.py")) == sorted(bundle.handlers)
        assert (out / "gco" / "endpoints" / "store.py").is_file()
        for absent in ("local", "cli", "validation"):
            assert not (out / "gco" / absent).exists()
        assert not list(out.rglob("__pycache__")), "no bytecode a different Python would refuse"
    assert (regional / "reconciler.py").is_file() and (regional / "authorizer.py").is_file()
    assert (regional / "gco" / "reconcile" / "reconciler.py").is_file()
    assert not (regional / "gco" / "bench").exists()  # the statistics are the rollout's alone
    # of the benchmarks, the rollout step takes only the statistics (its paired bootstrap)
    bench_dir = rollout / "gco" / "bench"
    bench = {str(path.relative_to(bench_dir)) for path in bench_dir.rglob("*.py")}
    assert bench == {"__init__.py", "errors.py", "analysis/__init__.py", "analysis/stats.py"}


def test_every_handler_is_in_one_bundle() -> None:
    shipped = [handler for bundle in BUNDLES for handler in bundle.handlers]
    assert sorted(shipped) == sorted(path.name for path in (ROOT / "lambdas").glob("*.py"))


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda bundle: bundle.name)
def test_the_bundle_holds_exactly_the_modules_the_handlers_import(bundle: Bundle, tmp_path: Path) -> None:
    bundling = LocalPythonBundling(bundle=bundle, install_dependencies=False, runtime=OTHER_PYTHON)
    assert bundling.try_bundle(str(tmp_path), image=None)  # type: ignore[arg-type]
    bundled = {str(path.relative_to(tmp_path)) for path in (tmp_path / "gco").rglob("*.py")}
    # modulefinder also follows imports under `if TYPE_CHECKING:`, which never run: the lazy faces of
    # `gco.endpoints` and `gco.reconcile` name modules there only. So nothing is shipped that it does not
    # find; that nothing the bundle's code imports is missing is test_bundling_install's (every import
    # resolves in the bundle) and test_bundle_imports' (each handler runs from it alone).
    found = imported_by_handlers(bundle.handlers)
    assert bundled <= found
    assert "gco/endpoints/table.py" not in bundled  # no handler creates the table
    if bundle is REGIONAL:
        # The Regional handlers import all of `gco.reconcile` but what only the type checker reads.
        assert bundled == found - {"gco/endpoints/table.py"}
        # Imported only inside a function (the EKS client, built on the first invocation): still shipped.
        assert "gco/reconcile/eks.py" in bundled
    else:
        assert "gco/reconcile/reconciler.py" not in bundled  # named by the type checker alone
    # The stand-in API server and the local reconcilers live with the local stack, which no handler imports.
    assert not any(path.startswith("gco/local/") for path in bundled)


def test_bundle_ships_unchecked_bytecode_naming_the_task_root(tmp_path: Path) -> None:
    """Built by the runtime's Python: every module has bytecode Lambda loads without the source's mtime."""
    bundling = LocalPythonBundling(bundle=REGIONAL, install_dependencies=False, runtime=THIS_PYTHON)
    assert bundling.try_bundle(str(tmp_path), image=None)  # type: ignore[arg-type]
    source = tmp_path / "gco" / "reconcile" / "runtime.py"
    cached = Path(importlib.util.cache_from_source(str(source)))
    data = cached.read_bytes()
    # PEP 552 flags: bit 0 hash-based, bit 1 check_source; unchecked = 0b01.
    assert int.from_bytes(data[4:8], "little") == 0b01
    assert marshal.loads(data[16:])  # noqa: S302 (bytecode this test just wrote).co_filename == f"{TASK_ROOT}/gco/reconcile/runtime.py"
    assert len(list(tmp_path.rglob("*.pyc"))) == len(list(tmp_path.rglob("*.py")))
    assert not compile_bundle(tmp_path, OTHER_PYTHON)


def test_bytecode_for_the_functions_python_is_made_by_that_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CDK app runs on another Python than the functions': the build compiles with one of theirs."""
    interpreter = runtime_interpreter(RUNTIME)
    if interpreter is None:
        pytest.skip(f"no Python {python_version(RUNTIME)} on this machine: the build ships source only")
    magic = subprocess.run(
        [
            interpreter,
            "-c",
            "import importlib.util, sys; sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (tmp_path / "module.py").write_text("VALUE = 1\n")
    assert compile_bundle(tmp_path, RUNTIME)
    (cached,) = (tmp_path / "__pycache__").glob("module.*.pyc")
    assert cached.read_bytes()[:4].hex() == magic
    assert f"-{python_version(RUNTIME).replace('.', '')}" in cached.name
    monkeypatch.setenv(BUNDLE_PYTHON_ENV, sys.executable)  # a wrong one is asked, and refused
    assert runtime_interpreter(OTHER_PYTHON) is None


def test_requirements_are_what_the_handlers_import() -> None:
    names = {requirement.split(">")[0].split("=")[0] for requirement in LAMBDA_REQUIREMENTS}
    assert names == {
        "aws-lambda-powertools",
        "aws-xray-sdk",
        "pydantic",
        "httpx",
        "numpy",
        "scipy",
        "jsonschema",
    }
    regional = {requirement.split(">")[0].split("=")[0] for requirement in REGIONAL_REQUIREMENTS}
    assert regional == names - {"numpy", "scipy", "jsonschema"}  # the statistics are the rollout's


def test_wheels_are_asked_for_the_functions_python_and_architecture(tmp_path: Path) -> None:
    command = pip_install_command(tmp_path, RUNTIME, ARCHITECTURE)
    assert command[command.index("--python-version") + 1] == "3.13"
    platforms = {command[i + 1] for i, arg in enumerate(command) if arg == "--platform"}
    assert {"manylinux2014_x86_64", "manylinux_2_28_x86_64", "manylinux_2_34_x86_64"} <= platforms
    assert "manylinux_2_35_x86_64" not in platforms
    # Exactly the locked wheels: no resolution on the build machine, every file's hash checked.
    assert command[-4:] == ["--no-deps", "--require-hashes", "-r", str(LOCK)]


def test_uv_is_asked_for_the_same_wheels(tmp_path: Path) -> None:
    command = uv_install_command("uv", tmp_path, RUNTIME, ARCHITECTURE)
    assert command[command.index("--python-version") + 1] == "3.13"
    # uv's platform names the newest glibc (Amazon Linux 2023's 2.34) and takes every older tag with it
    assert command[command.index("--python-platform") + 1] == "x86_64-manylinux_2_34"
    arm = uv_install_command("uv", tmp_path, lambda_.Runtime.PYTHON_3_11, lambda_.Architecture.ARM_64)
    assert arm[arm.index("--python-platform") + 1] == "aarch64-manylinux_2_26"
    assert command[command.index("--only-binary") + 1] == ":all:"
    assert command[-4:] == ["--no-deps", "--require-hashes", "-r", str(LOCK)]


def test_platforms_follow_the_architecture_and_the_runtime_glibc() -> None:
    arm = manylinux_platforms(lambda_.Runtime.PYTHON_3_13, lambda_.Architecture.ARM_64)
    assert all(tag.endswith("_aarch64") for tag in arm) and arm[0] == "manylinux_2_34_aarch64"
    amazon_linux_2 = manylinux_platforms(lambda_.Runtime.PYTHON_3_11, lambda_.Architecture.X86_64)
    assert amazon_linux_2[0] == "manylinux_2_26_x86_64" and amazon_linux_2[-1] == "manylinux2014_x86_64"


def test_only_python_runtimes_have_a_python_version() -> None:
    assert python_version(lambda_.Runtime.PYTHON_3_12) == "3.12"
    with pytest.raises(ValueError, match="nodejs"):
        python_version(lambda_.Runtime.NODEJS_22_X)


def bundled_functions(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The properties of every function whose code is the bundled asset: an S3 asset whose handler is one
    of lambdas/ (inline functions, and CDK's own kubectl provider functions, are not)."""
    handlers = {f"{path.stem}.handler" for path in (Path(__file__).parents[2] / "lambdas").glob("*.py")}
    return [
        resource["Properties"]
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
        and "S3Key" in resource["Properties"].get("Code", {})
        and resource["Properties"].get("Handler") in handlers
    ]


def test_every_function_of_a_region_shares_one_bundled_asset(synthesized: Synthesized) -> None:
    functions = bundled_functions(synthesized.template_json(f"gco-regional-{OTHER}"))
    assert len({function["Code"]["S3Key"] for function in functions}) == 1


@pytest.mark.parametrize("region", [HOME, OTHER])
def test_bundled_functions_run_the_runtime_the_wheels_are_for(synthesized: Synthesized, region: str) -> None:
    functions = bundled_functions(synthesized.template_json(f"gco-regional-{region}"))
    assert len(functions) == 3  # the stream handler, the sweep and the global address's authorizer
    for function in functions:
        assert function["Runtime"] == RUNTIME.name
        # CloudFormation's default, when a function names none, is x86_64.
        assert function.get("Architectures", ["x86_64"]) == [ARCHITECTURE.name]


def test_handler_imports_follow_what_runs(tmp_path: Path) -> None:
    """Imports inside functions and relative ones are followed; `if TYPE_CHECKING:` imports and modules
    nothing imports are not."""
    files = {
        "lambdas/handler.py": "from gco.a import run\n",
        "gco/__init__.py": "",
        "gco/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gco import typed\n"
        "def run():\n    from . import later\n",
        "gco/later.py": "from gco.sub import leaf\n",
        "gco/sub/__init__.py": "",
        "gco/sub/leaf.py": "import json\n",
        "gco/typed.py": "",
        "gco/unused.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = handler_modules(tmp_path, [tmp_path / "lambdas" / "handler.py"])
    assert {str(path) for path in found} == {
        "gco/__init__.py",
        "gco/a.py",
        "gco/later.py",
        "gco/sub/__init__.py",
        "gco/sub/leaf.py",
    }


def test_an_unchanged_bundle_is_copied_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GCO_BUNDLE_CACHE", str(tmp_path / "cache"))
    bundling = LocalPythonBundling(bundle=REGIONAL, install_dependencies=False, runtime=THIS_PYTHON)
    assert bundling.try_bundle(str(tmp_path / "first"), image=None)  # type: ignore[arg-type]

    def no_build(*_: object) -> None:
        raise AssertionError("an unchanged bundle was built again")

    monkeypatch.setattr(LocalPythonBundling, "_build", no_build)
    assert bundling.try_bundle(str(tmp_path / "second"), image=None)  # type: ignore[arg-type]
    first = {
        p.relative_to(tmp_path / "first"): p.read_bytes()
        for p in (tmp_path / "first").rglob("*")
        if p.is_file()
    }
    second = {
        p.relative_to(tmp_path / "second"): p.read_bytes()
        for p in (tmp_path / "second").rglob("*")
        if p.is_file()
    }
    assert first == second and any(str(p).endswith(".pyc") for p in first)


def test_a_cached_bundle_with_bytecode_is_used_without_looking_for_the_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GCO_BUNDLE_CACHE", str(tmp_path / "cache"))
    bundling = LocalPythonBundling(bundle=REGIONAL, install_dependencies=False, runtime=THIS_PYTHON)
    assert bundling.try_bundle(str(tmp_path / "first"), image=None)  # type: ignore[arg-type]

    def no_search(*_: object) -> None:
        raise AssertionError("the interpreter was looked for although a bundle with bytecode was cached")

    monkeypatch.setattr(bundling_module, "runtime_interpreter", no_search)
    assert bundling.try_bundle(str(tmp_path / "second"), image=None)  # type: ignore[arg-type]
    assert list((tmp_path / "second").rglob("*.pyc")) and "no bytecode" not in capsys.readouterr().err


def test_without_the_runtime_s_python_the_bundle_ships_source_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GCO_BUNDLE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(bundling_module, "runtime_interpreter", lambda _runtime: None)
    bundling = LocalPythonBundling(bundle=REGIONAL, install_dependencies=False, runtime=THIS_PYTHON)
    for attempt in ("first", "second"):  # built, then linked from the cache: the same words each time
        assert bundling.try_bundle(str(tmp_path / attempt), image=None)  # type: ignore[arg-type]
        assert not list((tmp_path / attempt).rglob("*.pyc"))
        assert "gco bundling: no bytecode shipped" in capsys.readouterr().err


def test_the_cache_key_changes_with_every_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    for relative in (
        "stacks/bundling.py",
        "stacks/handler_imports.py",
        "lambdas/requirements.txt",
        "lambdas/sweep.py",
    ):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes((ROOT / relative).read_bytes())
    monkeypatch.setattr("stacks.bundling.ROOT", root)
    sources = [Path("lambdas/sweep.py")]
    plain = LocalPythonBundling(bundle=ROLLOUT, install_dependencies=False, runtime=THIS_PYTHON)
    wheels = LocalPythonBundling(bundle=ROLLOUT, install_dependencies=True, runtime=THIS_PYTHON)
    keys = {plain.cache_key(sources, bytecode=True), plain.cache_key(sources, bytecode=False)}
    before = wheels.cache_key(sources, bytecode=True)
    keys.add(before)
    (root / "lambdas" / "requirements.txt").write_text("pydantic==2.0.0 --hash=sha256:" + "0" * 64 + "\n")
    keys.add(wheels.cache_key(sources, bytecode=True))
    assert plain.cache_key(sources, bytecode=True) in keys  # the lock does not count without wheels
    (root / "lambdas" / "sweep.py").write_text("# changed\n")
    keys.add(plain.cache_key(sources, bytecode=True))
    assert len(keys) == 5


def test_the_functions_python_gco_looks_for_is_the_runtime_s() -> None:
    """gco cannot import the CDK: the local stack looks for FUNCTIONS_PYTHON, the bundling builds for
    RUNTIME; the two must be one Python."""
    assert python_version(RUNTIME) == FUNCTIONS_PYTHON


def test_bundles_for_this_python_only_when_asked() -> None:
    assert for_this_python({BUNDLE_FOR_THIS_PYTHON_ENV: "1"})
    assert not any(for_this_python(environ) for environ in ({}, {BUNDLE_FOR_THIS_PYTHON_ENV: "0"}))


def test_wheels_for_this_python_are_the_lock_s_versions_unhashed(tmp_path: Path) -> None:
    command = this_python_install_command(tmp_path / "out", tmp_path / "pins.txt")
    assert command[0] == sys.executable and "--only-binary=:all:" in command and "--no-deps" in command
    assert not {"--platform", "--python-version", "--implementation", "--require-hashes"} & set(command)
    pins = pinned_versions(LOCK).splitlines()
    assert pins and all(re.fullmatch(r"[A-Za-z0-9_.-]+==[^ ]+", line) for line in pins)


def test_a_bundle_for_this_python_is_another_cached_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = [Path("lambdas/sweep.py")]
    for install in (False, True):
        runtime = LocalPythonBundling(bundle=REGIONAL, install_dependencies=install)
        here = LocalPythonBundling(bundle=REGIONAL, install_dependencies=install, this_python=True)
        assert runtime.cache_key(sources, bytecode=True) != here.cache_key(sources, bytecode=True)
    this_one = here.cache_key(sources, bytecode=True)
    monkeypatch.setattr(bundling_module, "this_python_tag", lambda: "cpython-399 linux-x86_64")
    assert here.cache_key(sources, bytecode=True) != this_one  # another Python, another bundle


def test_a_bundle_for_this_python_ships_this_python_s_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GCO_BUNDLE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(bundling_module, "runtime_interpreter", lambda _runtime: None)  # not needed
    bundling = LocalPythonBundling(bundle=REGIONAL, install_dependencies=False, this_python=True)
    assert bundling.try_bundle(str(tmp_path / "out"), image=None)  # type: ignore[arg-type]
    assert list((tmp_path / "out").rglob(f"*.{sys.implementation.cache_tag}.pyc"))
    assert "no bytecode" not in capsys.readouterr().err


@pytest.mark.parametrize("asked", [False, True])
def test_the_option_is_part_of_the_bundling_options_cdk_sees(
    asked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CDK reuses one bundling result per source path and options: each kind of bundle must differ there."""
    seen: list[dict[str, Any]] = []
    real = aws_cdk.BundlingOptions

    def recorded(**options: Any) -> Any:
        seen.append(options)
        return real(**options)

    monkeypatch.setattr(bundling_module, "BundlingOptions", recorded)
    if asked:
        monkeypatch.setenv(BUNDLE_FOR_THIS_PYTHON_ENV, "1")
    else:
        monkeypatch.delenv(BUNDLE_FOR_THIS_PYTHON_ENV, raising=False)
    lambda_code(bundle=REGIONAL, install_dependencies=True)
    (options,) = seen
    assert options["local"].this_python is asked
    tag = options["environment"].get(BUNDLE_FOR_THIS_PYTHON_ENV)
    assert tag == (this_python_tag() if asked else None)


def test_a_pyenv_shim_on_the_path_is_not_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shim only runs one of pyenv's installs, which are looked for directly (and its start is slow)."""
    shims, ran = tmp_path / "pyenv" / "shims", tmp_path / "ran"
    shims.mkdir(parents=True)
    (shims / "python3.1").write_text(f"#!/bin/sh\ntouch {ran}\nexit 1\n")
    (shims / "python3.1").chmod(0o755)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("PATH", str(shims))
    monkeypatch.delenv(BUNDLE_PYTHON_ENV, raising=False)
    assert runtime_interpreter(OTHER_PYTHON) is None
    assert not ran.exists()
