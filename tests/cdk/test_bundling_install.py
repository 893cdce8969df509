"""The Lambda bundle with its wheels, built once by the real pip run (PyPI and pip's cache).

It must load on the function's runtime: wheels for its CPython and architecture, every import resolved.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.tags import Tag, parse_tag
from packaging.utils import canonicalize_name

from stacks import bundling
from stacks.bundle_size import BUNDLE_SIZE_LIMIT, measure
from stacks.bundling import (
    ARCHITECTURE,
    BUNDLES,
    LAMBDA_REQUIREMENTS,
    LOCK,
    REGIONAL,
    REGIONAL_LOCK,
    REGIONAL_REQUIREMENTS,
    ROLLOUT_REQUIREMENTS,
    ROOT,
    RUNTIME,
    Bundle,
    LocalPythonBundling,
    resolve_lock,
)
from tests.tools.lambda_runtime import runtime_sdk

# Stated here rather than taken from stacks.bundling, so a wrong mapping there cannot pass.
MACHINE = {"x86_64": "x86_64", "arm64": "aarch64"}[ARCHITECTURE.name]
ELF_MACHINE = {"x86_64": 62, "aarch64": 183}[MACHINE]  # e_machine: EM_X86_64, EM_AARCH64
CPYTHON = RUNTIME.name.removeprefix("python").replace(".", "")  # "python3.13" -> "313"
# Amazon Linux 2023, under every Python runtime from 3.12 on, has glibc 2.34.
GLIBC_MINOR = 34
# The Lambda runtime provides these (and their own dependencies); bundling them would shadow it.
# urllib3 is botocore's, and gco's Kubernetes client imports it (gco.reconcile.kubeapi).
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer", "urllib3"})


# What each bundle's lock resolves: the regional functions' own, and the rollout's with the statistics.
REQUIREMENTS = {"regional": REGIONAL_REQUIREMENTS, "rollout": LAMBDA_REQUIREMENTS}


@pytest.fixture(scope="module", params=BUNDLES, ids=lambda bundle: bundle.name)
def kind(request: pytest.FixtureRequest) -> Bundle:
    bundle: Bundle = request.param
    return bundle


@pytest.fixture(scope="module")
def bundle(kind: Bundle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp(f"lambda-bundle-{kind.name}")
    assert LocalPythonBundling(bundle=kind, install_dependencies=True).try_bundle(str(out), image=None)  # type: ignore[arg-type]
    return out


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` by its relative path, with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def distributions(bundle: Path) -> dict[str, metadata.Distribution]:
    return {canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions(path=[str(bundle)])}


def test_handlers_library_and_every_requirement_are_bundled(kind: Bundle, bundle: Path) -> None:
    handlers = {path.name for path in (ROOT / "lambdas").glob("*.py")}
    assert {path.name for path in bundle.glob("*.py")} & handlers == set(kind.handlers)
    assert (bundle / "gco" / "endpoints" / "record.py").is_file()
    installed = distributions(bundle)
    for requirement in map(Requirement, REQUIREMENTS[kind.name]):
        name = canonicalize_name(requirement.name)
        assert name in installed, name
        assert requirement.specifier.contains(installed[name].version), (name, installed[name].version)


def test_the_runtime_sdk_is_not_bundled(bundle: Path) -> None:
    assert not RUNTIME_PROVIDED & distributions(bundle).keys()
    assert not any((bundle / name).exists() for name in RUNTIME_PROVIDED)


def loads_on_lambda(tag: Tag) -> bool:
    """Whether a wheel tag is one the Lambda's CPython, glibc and architecture accept."""
    if tag.platform == "any":
        return tag.abi == "none"
    manylinux = re.fullmatch(rf"manylinux(?:_2_(\d+)|2014|2010|1)_{MACHINE}", tag.platform)
    glibc_ok = manylinux is not None and int(manylinux.group(1) or 0) <= GLIBC_MINOR
    abi3_ok = tag.abi == "abi3" and int(tag.interpreter.removeprefix("cp")) <= int(CPYTHON)
    return glibc_ok and (tag.abi == f"cp{CPYTHON}" or abi3_ok)


def test_every_wheel_is_built_for_the_lambda_python_and_architecture(bundle: Path) -> None:
    for dist in metadata.distributions(path=[str(bundle)]):
        lines = (dist.read_text("WHEEL") or "").splitlines()
        tags = [tag for line in lines if line.startswith("Tag:") for tag in parse_tag(line[4:].strip())]
        assert any(map(loads_on_lambda, tags)), (dist.metadata["Name"], [str(tag) for tag in tags])


def elf_machine(path: Path) -> int:
    header = path.read_bytes()[:20]
    assert header[:6] == b"\x7fELF\x02\x01", f"{path.name}: not a 64-bit little-endian ELF file"
    return int.from_bytes(header[18:20], "little")


def test_every_extension_module_loads_on_the_lambda_cpython(bundle: Path) -> None:
    shared = sorted(bundle.rglob("*.so*"))
    assert shared, "pydantic-core should bring at least one compiled extension"
    for path in shared:
        assert elf_machine(path) == ELF_MACHINE, path.name
        if ".cpython-" in path.name:
            assert f".cpython-{CPYTHON}-{MACHINE}-linux-gnu.so" in path.name, path.name


def absolute_imports(tree: ast.AST) -> Iterator[str]:
    """Dotted modules a file imports at run time (those under `if TYPE_CHECKING:` never are)."""
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for statement in node.body
        for inner in ast.walk(statement)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def resolves_in(bundle: Path, module: str) -> bool:
    path = bundle.joinpath(*module.split("."))
    compiled = path.parent.is_dir() and any(path.parent.glob(f"{path.name}.*.so"))
    return path.with_suffix(".py").is_file() or path.is_dir() or compiled


def test_every_bundled_import_resolves_on_lambda(kind: Bundle, bundle: Path) -> None:
    # The handlers and gco, not the wheels: those import per Python version (annotationlib on 3.14).
    handlers = [bundle / handler for handler in kind.handlers]
    sources = [*handlers, *(bundle / "gco").rglob("*.py")]
    assert len(handlers) >= 2 and len(sources) > 10
    unresolved = {
        f"{source.relative_to(bundle)}: {module}"
        for source in sources
        for module in absolute_imports(ast.parse(source.read_text()))
        if module.split(".")[0] not in sys.stdlib_module_names | RUNTIME_PROVIDED
        and not resolves_in(bundle, module)
    }
    assert not unresolved, sorted(unresolved)


def test_nothing_in_the_bundle_names_this_machine(bundle: Path) -> None:
    """The asset is hashed on its content: a build-machine path in it would redeploy on every machine."""
    here = [str(ROOT).encode(), sys.executable.encode(), sys.prefix.encode()]
    for path in bundle.rglob("*"):
        if path.is_file():
            body = path.read_bytes()
            assert not any(marker in body for marker in here), path.relative_to(bundle)


def locked(lock: Path = LOCK) -> dict[str, str]:
    """A lock's pins: canonical name -> version."""
    pins: dict[str, str] = {}
    for line in lock.read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split(" ", 1)[0].split("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_the_bundle_holds_exactly_the_locked_wheels(kind: Bundle, bundle: Path) -> None:
    installed = {name: dist.version for name, dist in distributions(bundle).items()}
    assert installed == locked(ROOT / kind.lock)


def test_the_lock_is_the_resolution_of_the_requirements(tmp_path: Path) -> None:
    """Resolving LAMBDA_REQUIREMENTS again (held to the locked versions) gives the lock itself: a new
    requirement, a dropped one, or a pin outside its range fails here (`python -m stacks.bundling`)."""
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in locked().items()))
    assert resolve_lock(constraints=constraints) == LOCK.read_text()


def test_the_regional_lock_is_its_requirements_resolved_within_the_full_lock(tmp_path: Path) -> None:
    """The same wheels as the full lock (line for line), only those REGIONAL_REQUIREMENTS need, and
    none of the rollout's statistics."""
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in locked().items()))
    regional = REGIONAL_LOCK.read_text()
    assert resolve_lock(constraints=constraints, requirements=REGIONAL_REQUIREMENTS) == regional
    full = set(LOCK.read_text().splitlines())
    assert all(line in full for line in regional.splitlines() if line[:1].isalnum())
    statistics = {canonicalize_name(Requirement(r).name) for r in ROLLOUT_REQUIREMENTS}
    assert not statistics & locked(REGIONAL_LOCK).keys()


def test_the_bundle_unzipped_fits_gco_s_limit_below_lambda_s_quota(kind: Bundle, bundle: Path) -> None:
    """Lambda refuses a function whose package unzips to more than 250 MiB; gco holds its bundles to
    BUNDLE_SIZE_LIMIT, and the size is measured as the synth measures it."""
    size = sum(path.stat().st_size for path in bundle.rglob("*") if path.is_file())
    assert measure(kind.name, bundle).total == size
    assert size < BUNDLE_SIZE_LIMIT, f"{size:,} bytes unzipped"


def test_only_the_rollout_bundle_carries_the_statistics(kind: Bundle, bundle: Path) -> None:
    """The reconciler's handlers and the authorizer (on a request's path) need neither numpy nor scipy:
    their package is a tenth of the rollout's, which Lambda fetches and unpacks on each cold start."""
    statistics = {canonicalize_name(Requirement(r).name) for r in ROLLOUT_REQUIREMENTS}
    assert statistics & distributions(bundle).keys() == (set() if kind is REGIONAL else statistics)
    assert (bundle / "numpy").exists() == (bundle / "scipy").exists() == (kind is not REGIONAL)


def test_a_second_build_is_byte_for_byte_the_same(kind: Bundle, bundle: Path, tmp_path: Path) -> None:
    """The asset hash is taken over the bundle: two builds must not differ, or every synth redeploys."""
    assert LocalPythonBundling(bundle=kind, install_dependencies=True).try_bundle(str(tmp_path), image=None)  # type: ignore[arg-type]
    first, second = tree(bundle), tree(tmp_path)
    assert first.keys() == second.keys()
    assert [name for name in first if first[name] != second[name]] == []


def test_pip_builds_the_bundle_uv_builds(
    kind: Bundle, bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the build's environment has no uv, pip installs the wheels: the same bundle byte for byte
    (the same asset hash, so a machine's installer never redeploys a function)."""
    assert bundling.find_uv() is not None  # the module's `bundle` was built by uv (the locks pin it)
    monkeypatch.setattr(bundling, "find_uv", lambda: None)
    assert LocalPythonBundling(bundle=kind, install_dependencies=True).try_bundle(str(tmp_path), image=None)  # type: ignore[arg-type]
    by_uv, by_pip = tree(bundle), tree(tmp_path)
    assert by_uv.keys() == by_pip.keys()
    assert [name for name in by_uv if by_uv[name] != by_pip[name]] == []


def test_a_bundle_for_this_python_imports_on_it_alone(tmp_path: Path) -> None:
    """The local stack's bundle where the runtime's Python is missing (BUNDLE_FOR_THIS_PYTHON_ENV): the
    lock's versions as this interpreter's wheels, its handlers importing with this interpreter, the
    bundle and the runtime's SDK alone on the path (the compiled pydantic_core is this Python's)."""
    out = tmp_path / "bundle"
    bundling = LocalPythonBundling(bundle=REGIONAL, install_dependencies=True, this_python=True)
    assert bundling.try_bundle(str(out), image=None)  # type: ignore[arg-type]
    assert {name: dist.version for name, dist in distributions(out).items()} == locked(REGIONAL_LOCK)
    assert list(out.glob(f"pydantic_core/*.cpython-{sys.version_info.major}{sys.version_info.minor}-*.so"))
    sdk = runtime_sdk(tmp_path / "runtime")
    imports = "import sys; sys.path[:0] = sys.argv[1:3]; import reconciler, authorizer, sweep, pydantic_core"
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", imports, str(out), str(sdk)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
