"""Lambda code bundled without Docker: the handlers, the `gco` modules they import, and Lambda wheels.

`LocalPythonBundling` implements CDK's ILocalBundling: it copies one `Bundle`'s handlers from
`lambdas/` and the modules of `gco/` they import (`handler_imports.py`: the local stack and the CLI
are not shipped) into the asset directory and, when asked, installs that bundle's locked
requirements (every wheel pinned by version and hash for the functions' Python and architecture)
with `uv pip install --python-platform ... --only-binary :all: --require-hashes` where the build's
environment has uv (both locks pin it), else `pip --platform ...` with the same options, so every
machine builds the same bundle either way (what each installer writes about itself is removed:
`_drop_machine_specific`). uv installs the rollout bundle's 188 MiB of wheels in a tenth of pip's
CPU (docs/benchmarks.md). The Docker image CDK would otherwise use is never pulled: `try_bundle`
always succeeds or raises.

Two bundles: `REGIONAL` (the reconciler's handlers and the global front door's authorizer, from
`lambdas/requirements-regional.txt`) and `ROLLOUT` (the rollout workflow's step and starter, from
`lambdas/requirements.txt`, which adds numpy, scipy and jsonschema). The regional lock is resolved
within the full one, so a package common to both is the same wheel in both.

Lambda's task root is read-only, so a bundle without bytecode is compiled from source on every cold
start (and the result thrown away): where the build machine has the runtime's Python (same CPython
minor version: this interpreter, `$GCO_BUNDLE_PYTHON`, `pythonX.Y` on the PATH or a pyenv install),
`compile_bundle` ships `__pycache__` in the bundle, hash-based and unchecked (the zip's timestamps
cannot invalidate it, and the bundle never changes after the build). A build without it ships source
only and says so on stderr: bytecode of one minor version is refused by another
(`benchmarks/cold_start.py` measures the difference).

Why Python 3.13: it is the newest Lambda Python the project's build machines have (pyenv) besides
the 3.11 the CDK app runs on, whose Lambda runtime is the nearest its deprecation; 3.14 is on none of
them. So every build ships bytecode; Lambda supports 3.13 until mid-2029.

A finished bundle is kept in a cache (`$GCO_BUNDLE_CACHE`, default `~/.cache/gco/lambda-bundles`)
under a key of everything it is made from: the lock file, each shipped source file's path and
content, the runtime, the architecture, whether wheels are installed, whether bytecode is shipped, and
this module's own source. A synth whose inputs are unchanged copies the cached bundle instead of
running pip and compileall again (`benchmarks/synth.py` prints cold and warm synth times and the
share spent bundling); a changed input is a new key, so a stale bundle is never reused. The newest
few bundles are kept.

For the local stack on a machine without the runtime's Python (`stacks/local_synth.py`), the opt-in
`$GCO_BUNDLE_FOR_THIS_PYTHON=1` installs each lock's versions (`pinned_versions`: no hashes, which are
those of the runtime's wheels) as wheels for the interpreter running the synth, and compiles the
bytecode with it: a bundle that runs here, never one to deploy. The option is part of the bundling
options CDK sees and of the cache key, so neither kind of bundle is ever taken for the other.

Each bundle's unzipped size is measured when it is built and printed on the synth's stderr
(`gco bundling: regional: 41.2 MiB unzipped, ...`); one over 200 MiB fails the synth naming its largest
packages (`stacks/bundle_size.py`). The two bundles are two assets: CDK keeps one bundling result per
source path and bundling options, so each bundle's name is part of its options (`lambda_code`).

    .venv/bin/python -m stacks.bundling     # re-resolve the requirements into the two locks
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from gco.processes.cpython import BUNDLE_PYTHON_ENV, find_cpython
from gco.processes.interpreter import PYTHON
from stacks.bundle_size import BundleSize, check, measure
from stacks.handler_imports import handler_modules

ROOT = Path(__file__).resolve().parent.parent
# The runtime and architecture of every function running the bundled code; wheels are chosen for them.
RUNTIME = lambda_.Runtime.PYTHON_3_13
# Functions whose code is inline (no bundle, so no bytecode to ship) run the newest Lambda Python.
INLINE_RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.X86_64
# What every handler imports beyond the Lambda runtime's boto3, in the project's ranges; resolved into
# REGIONAL_LOCK. Powertools' Tracer imports the X-Ray SDK, which needs wrapt: neither comes with
# Powertools nor with the Lambda runtime.
REGIONAL_REQUIREMENTS = (
    "aws-lambda-powertools>=3.0,<4",
    "aws-xray-sdk>=2.14,<3",
    "pydantic>=2.7,<3",
    "httpx>=0.27,<1",
)
# What only the rollout step (lambdas/rollout.py) adds: it decides with the bench's paired bootstrap
# (gco.bench.analysis). Below numpy 2.5 and scipy 1.18: those have no wheels for Python 3.11, the
# project's own, on which the tests run the bundle's handlers with exactly the lock's versions
# (test_bundle_imports.py).
ROLLOUT_REQUIREMENTS = (
    "numpy>=1.26,<2.5",
    "scipy>=1.11,<1.18",
    "jsonschema>=4.20,<5",  # the rollout's evidence records are schema-checked before they are written
)
# Everything any handler imports; resolved into LOCK.
LAMBDA_REQUIREMENTS = (*REGIONAL_REQUIREMENTS, *ROLLOUT_REQUIREMENTS)
# The Lambda Python runtime provides the AWS SDK and its dependencies: never locked nor bundled (a
# bundled copy would shadow the runtime's on the import path).
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer", "urllib3", "python-dateutil", "six"})
LOCK = ROOT / "lambdas" / "requirements.txt"
# REGIONAL_REQUIREMENTS alone, resolved with LOCK as constraints: the same version and wheel of each.
REGIONAL_LOCK = ROOT / "lambdas" / "requirements-regional.txt"


@dataclass(frozen=True)
class Bundle:
    """One Lambda asset: the handlers it ships (files of `lambdas/`, with the `gco` modules they
    import) and the lock its wheels come from (relative to the project's root)."""

    name: str
    handlers: tuple[str, ...]
    lock: str


# The Regional stack's functions (the reconciler's stream and sweep handlers) and the global front
# door's authorizer: no numpy or scipy (about 210 MB of the 236 MB a bundle with them unzips to, and
# Lambda fetches and unpacks a function's whole package on every cold start, the authorizer's on a
# request's path).
REGIONAL = Bundle(
    "regional", ("authorizer.py", "reconciler.py", "sweep.py"), str(REGIONAL_LOCK.relative_to(ROOT))
)
# The global stack's rollout workflow: its step (the paired bootstrap) and the stream's starter.
ROLLOUT = Bundle("rollout", ("rollout.py", "rollout_starter.py"), str(LOCK.relative_to(ROOT)))
BUNDLES = (REGIONAL, ROLLOUT)
# Lambda's Python 3.12+ runtimes run on Amazon Linux 2023 (glibc 2.34), older ones on Amazon Linux 2
# (glibc 2.26); manylinux2014, the oldest tag worth accepting, is glibc 2.17.
_AL2023_FROM = (3, 12)
_GLIBC_AL2023, _GLIBC_AL2, _GLIBC_MANYLINUX2014 = 34, 26, 17
# Lambda names architectures as Docker does; manylinux tags use the kernel's machine names.
_MACHINES = {"x86_64": "x86_64", "arm64": "aarch64"}
# Where Lambda unpacks the bundle (LAMBDA_TASK_ROOT): the path the bytecode names in tracebacks.
TASK_ROOT = "/var/task"
# Environment variables of every function running the bundle. No wheel of the lock is a pydantic
# plugin, so pydantic is told not to look for one: otherwise building the first model (at each cold
# start) reads the entry points of every distribution on the function's path.
BUNDLE_ENVIRONMENT = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}
# The bundling options naming a bundle (`lambda_code`): never set in a function's environment.
BUNDLE_NAME_ENV, BUNDLE_WHEELS_ENV = "GCO_BUNDLE", "GCO_BUNDLE_WHEELS"
# Opt-in (`1`): every bundle's wheels and bytecode for the interpreter running the synth instead of
# the runtime's (the local stack where this machine has no Python of the runtime: stacks/local_synth.py).
# Read by `lambda_code`; also the bundling option naming that interpreter's tag.
BUNDLE_FOR_THIS_PYTHON_ENV = "GCO_BUNDLE_FOR_THIS_PYTHON"
# The file uv keeps at the root of an install target (`--target`) while it installs into it.
UV_TARGET_LOCK = ".lock"


def python_version(runtime: lambda_.Runtime) -> str:
    """The `X.Y` of a Lambda Python runtime ("python3.14" -> "3.14")."""
    match = re.fullmatch(r"python(3\.\d+)", runtime.name)
    if runtime.family != lambda_.RuntimeFamily.PYTHON or match is None:
        raise ValueError(f"not a CPython Lambda runtime: {runtime.name}")
    return match.group(1)


def manylinux_platforms(runtime: lambda_.Runtime, architecture: lambda_.Architecture) -> list[str]:
    """Every manylinux tag whose wheels load on the runtime's glibc and architecture, newest first.

    pip matches `--platform` tags literally (only the legacy `manylinux2014` adds `2010` and `1`),
    so a wheel built only for, say, manylinux_2_28 is skipped unless its tag is listed.
    """
    version = tuple(int(part) for part in python_version(runtime).split("."))
    glibc = _GLIBC_AL2023 if version >= _AL2023_FROM else _GLIBC_AL2
    machine = _MACHINES[architecture.name]
    minors = range(glibc, _GLIBC_MANYLINUX2014 - 1, -1)
    return [*(f"manylinux_2_{minor}_{machine}" for minor in minors), f"manylinux2014_{machine}"]


def _wheel_options(runtime: lambda_.Runtime, architecture: lambda_.Architecture) -> list[str]:
    """pip options that choose binary wheels for the runtime, not for this interpreter."""
    platforms = [arg for tag in manylinux_platforms(runtime, architecture) for arg in ("--platform", tag)]
    return [
        *("--implementation", "cp", "--python-version", python_version(runtime)),
        *platforms,
        "--only-binary=:all:",
    ]


def pip_install_command(
    target: Path, runtime: lambda_.Runtime, architecture: lambda_.Architecture, lock: Path = LOCK
) -> list[str]:
    """`pip install` of exactly the locked wheels (no resolution, every file's hash checked)."""
    return [
        *(*PYTHON, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(target)),
        *_wheel_options(runtime, architecture),
        *("--no-deps", "--require-hashes", "-r", str(lock)),
    ]


def uv_install_command(
    uv: str, target: Path, runtime: lambda_.Runtime, architecture: lambda_.Architecture, lock: Path = LOCK
) -> list[str]:
    """`pip_install_command` as uv says it: its `--python-platform` names the newest glibc the wheels
    may need and takes every older manylinux tag with it, as pip's list of `--platform` tags does."""
    newest = manylinux_platforms(runtime, architecture)[0]  # manylinux_2_34_x86_64
    machine = _MACHINES[architecture.name]
    platform = f"{machine}-{newest.removesuffix('_' + machine)}"  # x86_64-manylinux_2_34
    return [
        *(uv, "pip", "install", "--quiet", "--python", sys.executable, "--target", str(target)),
        *("--python-version", python_version(runtime), "--python-platform", platform),
        *("--only-binary", ":all:", "--no-deps", "--require-hashes", "-r", str(lock)),
    ]


def find_uv() -> str | None:
    """uv beside this interpreter (the virtual environment the locks install it into), else on the
    PATH; None where there is none (pip installs the wheels then)."""
    here = shutil.which("uv", path=str(Path(sys.executable).parent))
    return here or shutil.which("uv")


def resolve_lock(
    runtime: lambda_.Runtime = RUNTIME,
    architecture: lambda_.Architecture = ARCHITECTURE,
    constraints: Path | None = None,
    requirements: tuple[str, ...] = LAMBDA_REQUIREMENTS,
) -> str:
    """The lock file's text: `requirements` resolved (pip's dry-run report) for the runtime, each
    wheel as `name==version --hash=sha256:...`, sorted by name."""
    with tempfile.TemporaryDirectory(prefix="gco-lock-") as scratch:
        report = Path(scratch) / "report.json"
        subprocess.run(
            [
                *(*PYTHON, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed"),
                *("--report", str(report), "--target", str(Path(scratch) / "target")),
                *_wheel_options(runtime, architecture),
                *(["-c", str(constraints)] if constraints else []),
                *requirements,
            ],
            check=True,
        )
        installs = json.loads(report.read_text())["install"]
    lines = [
        f"# Generated by `python -m stacks.bundling` for {runtime.name} {architecture.name}: do not edit.",
        "# The Lambda bundle installs exactly these wheels (pip --no-deps --require-hashes).",
    ]
    for item in sorted(installs, key=lambda item: item["metadata"]["name"].lower()):
        if _canonical(item["metadata"]["name"]) in RUNTIME_PROVIDED:
            continue
        sha256 = item["download_info"]["archive_info"]["hashes"]["sha256"]
        lines.append(f"{item['metadata']['name']}=={item['metadata']['version']} --hash=sha256:{sha256}")
    return "\n".join(lines) + "\n"


def this_python_install_command(target: Path, pins: Path, uv: str | None = None) -> list[str]:
    """`pip install` (or uv's, given `uv`) of exactly the `pins` (a lock's `pinned_versions`) as this
    interpreter's binary wheels: the lock's hashes are those of the runtime's wheels, so none can be
    checked."""
    pip = [uv, "pip", "install", "--python", sys.executable] if uv else [*PYTHON, "-m", "pip", "install"]
    return [
        *pip,
        *("--quiet", "--target", str(target), *([] if uv else ["--no-compile"])),
        *("--only-binary=:all:", "--no-deps", "-r", str(pins)),
    ]


def for_this_python(environ: Mapping[str, str]) -> bool:
    """Whether the bundles are built for this interpreter (`BUNDLE_FOR_THIS_PYTHON_ENV` is `1`)."""
    return environ.get(BUNDLE_FOR_THIS_PYTHON_ENV, "").strip() == "1"


def this_python_tag() -> str:
    """This interpreter's bytecode and wheel tag and machine ("cpython-311 linux-x86_64"): what a
    bundle built for it depends on."""
    return f"{sys.implementation.cache_tag} {sysconfig.get_platform()}"


def pinned_versions(lock: Path) -> str:
    """The `name==version` lines of a lock, without their hashes."""
    lines = lock.read_text().splitlines()
    return "".join(line.split(" ", 1)[0] + "\n" for line in lines if line[:1].isalnum())


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@jsii.implements(ILocalBundling)
class LocalPythonBundling:
    """Copy `bundle`'s handlers and the code they import and (optionally) install its lock's wheels
    into the asset output directory: the runtime's wheels, or with `this_python` this interpreter's
    wheels of the same versions, its bytecode too (a bundle for the local stack, never deployed)."""

    def __init__(
        self,
        *,
        bundle: Bundle,
        install_dependencies: bool,
        runtime: lambda_.Runtime = RUNTIME,
        architecture: lambda_.Architecture = ARCHITECTURE,
        this_python: bool = False,
    ) -> None:
        self.bundle = bundle
        self.install_dependencies = install_dependencies
        self.runtime = runtime
        self.architecture = architecture
        self.this_python = this_python

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        started = time.perf_counter()
        out = Path(output_dir)
        handlers = [ROOT / "lambdas" / name for name in sorted(self.bundle.handlers)]
        sources = [*(h.relative_to(ROOT) for h in handlers), *sorted(handler_modules(ROOT, handlers))]
        if not self._fill(out, sources):
            version = python_version(self.runtime)
            print(
                f"gco bundling: no bytecode shipped (no Python {version} found here; set {BUNDLE_PYTHON_ENV} "
                f"to one): every cold start compiles the bundle from source",
                file=sys.stderr,
            )
        BUNDLE_SECONDS.append(time.perf_counter() - started)
        size = measure(self.bundle.name, out)
        BUNDLE_SIZES.append(size)
        print(size.line(), file=sys.stderr)
        check(size)  # over the limit: the synth fails here, naming the largest packages
        return True

    def _fill(self, out: Path, sources: list[Path]) -> bool:
        """Link the cached bundle of `sources` into `out`, or build and cache it; whether it ships bytecode.

        A cached bundle with bytecode serves whether or not this machine still has the runtime's
        Python, so only a miss looks for the interpreter (which starts a process per candidate).
        """
        cached = bundle_cache() / self.cache_key(sources, bytecode=True)
        if (cached / CACHE_COMPLETE).is_file():
            _link_tree(cached, out)
            return True
        interpreter = sys.executable if self.this_python else runtime_interpreter(self.runtime)
        cached = bundle_cache() / self.cache_key(sources, bytecode=interpreter is not None)
        if (cached / CACHE_COMPLETE).is_file():
            _link_tree(cached, out)
        else:
            self._build(out, sources, interpreter)
            _store(out, cached)
        return interpreter is not None

    def cache_key(self, sources: list[Path], *, bytecode: bool) -> str:
        """A digest of everything the bundle is made from (see the module's docstring)."""
        digest = hashlib.sha256()
        for part in (
            self.runtime.name,
            self.architecture.name,
            str(self.install_dependencies),
            str(bytecode),
            # only when set: the key of a bundle for the runtime stays what it was before the option
            *([f"for {this_python_tag()}"] if self.this_python else []),
        ):
            digest.update(part.encode() + b"\0")
        inputs = [
            ROOT / "stacks" / "bundling.py",
            ROOT / "stacks" / "handler_imports.py",
            *(ROOT / s for s in sources),
        ]
        if self.install_dependencies:
            inputs.append(ROOT / self.bundle.lock)
        for path in inputs:
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
        return digest.hexdigest()[:32]

    def _build(self, out: Path, sources: list[Path], interpreter: str | None) -> None:
        for relative in sources:  # the handlers (at the bundle's root) and the gco modules they import
            target = out / (relative.name if relative.parts[0] == "lambdas" else relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / relative, target)
        if self.install_dependencies:
            self._install(out)
            finish_wheels(out)
        if interpreter is not None:
            compile_bundle(out, self.runtime, interpreter)

    def _install(self, out: Path) -> None:
        """The lock's wheels into `out`: the runtime's, hash-checked; or this interpreter's of the same
        versions."""
        lock = ROOT / self.bundle.lock
        uv = find_uv()
        if not self.this_python:
            command = (
                uv_install_command(uv, out, self.runtime, self.architecture, lock)
                if uv
                else pip_install_command(out, self.runtime, self.architecture, lock)
            )
            subprocess.run(command, check=True)
            return
        with tempfile.TemporaryDirectory(prefix="gco-pins-") as scratch:
            pins = Path(scratch) / "pins.txt"
            pins.write_text(pinned_versions(lock), encoding="utf-8")
            subprocess.run(this_python_install_command(out, pins, uv), check=True)


# Seconds each bundling of this process took (benchmarks/synth.py reports their share of a synth).
BUNDLE_SECONDS: list[float] = []
# What each bundling of this process unzips to (printed at synth; benchmarks/synth.py reports them).
BUNDLE_SIZES: list[BundleSize] = []
BUNDLE_CACHE_ENV = "GCO_BUNDLE_CACHE"
CACHE_COMPLETE = ".gco-bundle-complete"
CACHE_KEEP = 4


def bundle_cache() -> Path:
    """Where finished bundles are kept: `$GCO_BUNDLE_CACHE`, else ~/.cache/gco/lambda-bundles."""
    return Path(os.environ.get(BUNDLE_CACHE_ENV) or Path.home() / ".cache" / "gco" / "lambda-bundles")


def _link_tree(cached: Path, out: Path) -> None:
    """The cached bundle into `out` as hard links (nothing is written to the files of an asset after
    bundling, so they can share the cache's), or copies where links cannot be made (another device)."""

    def link(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    shutil.copytree(
        cached, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns(CACHE_COMPLETE), copy_function=link
    )


def _store(out: Path, cached: Path) -> None:
    """Keep a copy of the bundle under its key (written aside, then renamed: a reader never sees half
    of one), and drop all but the newest CACHE_KEEP bundles. A cache that cannot be written costs
    only the next synth's time."""
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=cached.parent))
        shutil.copytree(out, partial, dirs_exist_ok=True)
        (partial / CACHE_COMPLETE).write_text("")
        try:
            partial.rename(cached)
        except OSError:  # another synth stored the same key first
            shutil.rmtree(partial, ignore_errors=True)
        kept = sorted(
            (p for p in cached.parent.iterdir() if (p / CACHE_COMPLETE).is_file()),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        for old in kept[CACHE_KEEP:]:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as error:
        print(f"gco bundling: bundle not cached ({error})", file=sys.stderr)


def runtime_interpreter(runtime: lambda_.Runtime) -> str | None:
    """A CPython of the runtime's X.Y on this machine, or None (`gco.processes.cpython.find_cpython`)."""
    return find_cpython(python_version(runtime))


def compile_bundle(out: Path, runtime: lambda_.Runtime, interpreter: str | None = None) -> bool:
    """Write the bundle's bytecode for `runtime` if this machine has its Python (`runtime_interpreter`).

    Hash-based and unchecked: Lambda imports it without reading the source's timestamp, which the
    asset's zip does not keep. The recorded source paths are Lambda's (`TASK_ROOT`), not this
    machine's, so tracebacks name the deployed files and the output is the same on every build machine.
    Bytecode is the same for every patch release of one X.Y, so any CPython X.Y here will do.

    Returns:
        True when the bytecode was written; False when no interpreter of the runtime's Python was found.
    """
    interpreter = interpreter or runtime_interpreter(runtime)
    if interpreter is None:
        return False
    # A file that does not compile (a wheel's template or test data) is left as source: importing
    # it would fail on Lambda too, so nothing that works is lost (compileall then exits 1).
    done = subprocess.run(
        [
            *(interpreter, "-m", "compileall", "-q", "-j", "0", "-d", TASK_ROOT),
            *("--invalidation-mode", "unchecked-hash", str(out)),
        ],
        check=False,
        timeout=600,
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{interpreter} -m compileall {out} failed with exit status {done.returncode}")
    return True


def finish_wheels(out: Path) -> None:
    """What every bundle's installed wheels go through after pip: what pip wrote for this machine out
    (`_drop_machine_specific`), the wheels' own test suites out (`_drop_wheel_tests`)."""
    _drop_machine_specific(out)
    _drop_wheel_tests(out)


def _drop_wheel_tests(out: Path) -> None:
    """Remove the test suites the wheels ship (`scipy/**/tests`, `numpy/**/tests`: about 70 MiB of
    the rollout bundle's 220, which Lambda fetches and unpacks on every cold start). No package imports
    its own test suite at run time (`numpy.testing`, a library, is kept); gco's code has no `tests`."""
    for package in out.iterdir():
        if not package.is_dir() or package.name == "gco" or package.name.endswith(".dist-info"):
            continue
        for tests in sorted(package.rglob("tests"), reverse=True):
            if tests.is_dir():
                shutil.rmtree(tests)


def _drop_machine_specific(out: Path) -> None:
    """Remove what the installer writes for this machine: console scripts (their first line names this
    interpreter), the RECORD files hashing them, each wheel's INSTALLER (`pip` or `uv`) and uv's lock
    file of the target. Lambda reads none of them, and left in they would make the asset's content
    hash, and so the deployed code, differ from one build machine to the next."""
    shutil.rmtree(out / "bin", ignore_errors=True)
    (out / UV_TARGET_LOCK).unlink(missing_ok=True)
    for written in (*out.glob("*.dist-info/RECORD"), *out.glob("*.dist-info/INSTALLER")):
        written.unlink()


def lambda_code(*, bundle: Bundle, install_dependencies: bool) -> lambda_.Code:
    """The asset of `bundle`'s functions: hashed on the output, bundled locally (for this interpreter
    where `BUNDLE_FOR_THIS_PYTHON_ENV` asks for it)."""
    this_python = for_this_python(os.environ)
    return lambda_.Code.from_asset(
        str(ROOT / "lambdas"),
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            # Never run (local bundling always succeeds); named so it matches the runtime if it were.
            image=RUNTIME.bundling_image,
            local=LocalPythonBundling(
                bundle=bundle, install_dependencies=install_dependencies, this_python=this_python
            ),
            command=["false"],
            # CDK keeps one bundling result per source path and bundling options in a synth
            # (AssetStaging's cache, keyed by their JSON), and cannot see inside the local bundler: without
            # an option that differs, the second bundle of `lambdas/` would be the first one again (every
            # Regional function shipping the rollout's handlers). The bundle and whether it installs
            # wheels are so part of the options, and (only when set) the interpreter they are built for.
            environment={
                BUNDLE_NAME_ENV: bundle.name,
                BUNDLE_WHEELS_ENV: str(install_dependencies).lower(),
                **({BUNDLE_FOR_THIS_PYTHON_ENV: this_python_tag()} if this_python else {}),
            },
        ),
    )


def write_locks() -> None:
    """Resolve LAMBDA_REQUIREMENTS into LOCK, then REGIONAL_REQUIREMENTS into REGIONAL_LOCK within it."""
    LOCK.write_text(resolve_lock(), encoding="utf-8")
    print(f"wrote {LOCK.relative_to(ROOT)}")
    with tempfile.TemporaryDirectory(prefix="gco-lock-") as scratch:
        pins = Path(scratch) / "constraints.txt"
        pins.write_text(pinned_versions(LOCK), encoding="utf-8")  # a hash in a constraint turns on hash mode
        REGIONAL_LOCK.write_text(
            resolve_lock(constraints=pins, requirements=REGIONAL_REQUIREMENTS), encoding="utf-8"
        )
    print(f"wrote {REGIONAL_LOCK.relative_to(ROOT)}")


if __name__ == "__main__":
    write_locks()
