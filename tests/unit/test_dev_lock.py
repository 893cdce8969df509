"""requirements/dev.lock, what `make test` installs (`pip install --require-hashes`), agrees with
pyproject.toml: every requirement of the project and of its cdk, local and dev extras is pinned to a
version its range allows, with hashes; nothing is pinned as pyproject's own that pyproject no longer
asks for; and the lock's header is the command `make lock` runs. requirements/demo.lock, what `make
demo` installs, is the part of it that the dependencies and the local extra need, at the same pins."""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "dev.lock"
DEMO_LOCK = ROOT / "requirements" / "demo.lock"
ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)")
# pip-compile's annotations of a package that pyproject.toml asks for itself (`gco`: through the dev
# extra's `gco[cdk]`).
DIRECT = {"gco (pyproject.toml)", "gco"}


def pyproject_requirements(extras: tuple[str, ...] = ("cdk", "local", "dev")) -> list[Requirement]:
    """The project's dependencies and those of its `extras`, without its references to itself
    (`gco[cdk,local]`). The `llama` extra is built by gco.local.llama.llama_build, not locked."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    raw = list(project["dependencies"])
    for extra in extras:
        raw += project["optional-dependencies"][extra]
    return [r for r in map(Requirement, raw) if canonicalize_name(r.name) != "gco"]


def locked(lock: Path = LOCK) -> dict[str, tuple[str, int, list[str]]]:
    """name -> (version, number of hashes, what it is there for) of every entry of the lock."""
    entries: dict[str, tuple[str, int, list[str]]] = {}
    current: str = ""
    for line in lock.read_text(encoding="utf-8").splitlines():
        found = ENTRY.match(line)
        if found:
            current = str(canonicalize_name(found["name"]))
            entries[current] = (found["version"], 0, [])
        elif current and line.strip().startswith("--hash=sha256:"):
            version, hashes, via = entries[current]
            entries[current] = (version, hashes + 1, via)
        elif current and line.startswith("    #"):
            text = line.strip("# ").removeprefix("via").strip()
            if text:
                entries[current][2].append(text)
        elif not line.startswith(" "):
            current = ""
    return entries


def test_every_pyproject_requirement_is_pinned_within_its_range_with_hashes() -> None:
    entries = locked()
    assert len(entries) > 50
    for requirement in pyproject_requirements():
        name = canonicalize_name(requirement.name)
        assert name in entries, f"{requirement} is not in {LOCK.name}: run make lock"
        version, hashes, via = entries[name]
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{LOCK.name} pins {name}=={version}, outside pyproject's {requirement}: run make lock"
        )
        assert DIRECT & set(via), f"{name}: {via}"
    for locked_name, (version, hashes, _) in entries.items():
        assert hashes >= 1, f"{locked_name}=={version} has no hash"


def test_nothing_is_pinned_as_a_requirement_pyproject_dropped() -> None:
    asked = {canonicalize_name(r.name) for r in pyproject_requirements()}
    for name, (version, _, via) in locked().items():
        if DIRECT & set(via):
            assert name in asked, f"{name}=={version} is pinned for pyproject.toml, which no longer asks"
        assert via, f"{name}: no reason recorded"


def test_the_lock_holds_no_local_path_or_index_and_not_the_project() -> None:
    text = LOCK.read_text(encoding="utf-8")
    assert "file://" not in text and "--index-url" not in text and "--find-links" not in text
    assert not re.search(r"^gco\b", text, re.MULTILINE)
    assert "aws-cdk-lib==" in text


def lock_commands() -> list[list[str]]:
    """The pip-compile command lines of the Makefile's `lock` recipe, `$(BIN)/` left out."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^lock:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, "the Makefile has a lock target"
    lines = recipe.group(1).replace("\\\n", " ").replace("$(BIN)/", "").splitlines()
    return [shlex.split(line) for line in lines if line.strip().startswith("pip-compile")]


def recorded_command(lock: Path) -> list[str]:
    header = next(line for line in lock.read_text().splitlines() if line.startswith("#    pip-compile "))
    return shlex.split(header.lstrip("# "))


def options(argv: list[str]) -> set[str]:
    # pip-compile writes `--flag=value` and leaves --quiet and --upgrade (how, not what) out.
    found, rest = set(), iter(argv[1:])
    for item in rest:
        if item in ("--quiet", "--upgrade", "--output-file"):
            continue
        option = f"{item}={next(rest)}" if item in ("--extra", "--unsafe-package") else item
        found.add(option.removeprefix("--output-file="))
    return found - {""}


def test_the_header_is_the_command_make_lock_runs() -> None:
    dev, demo = lock_commands()
    for command, lock, variable in ((dev, LOCK, "$(LOCK)"), (demo, DEMO_LOCK, "$(DEMO_LOCK)")):
        recorded = recorded_command(lock)
        assert command[0] == recorded[0] == "pip-compile"
        relative = str(lock.relative_to(ROOT))
        assert options(command) - {variable} == options(recorded) - {relative}, lock.name
    assert "--upgrade" in dev and "--upgrade" not in demo  # the demo's keeps the dev lock's pins


def test_the_demo_lock_is_the_dev_lock_for_the_dependencies_and_the_local_extra() -> None:
    dev, demo = locked(), locked(DEMO_LOCK)
    for name, (version, hashes, _) in demo.items():
        assert name in dev and dev[name][:2] == (version, hashes), f"{name}: run make lock"
    for requirement in pyproject_requirements(("local",)):
        name = canonicalize_name(requirement.name)
        assert name in demo, f"{requirement} is not in {DEMO_LOCK.name}: run make lock"
        assert requirement.specifier.contains(demo[name][0], prereleases=True)
    dev_text, demo_text = LOCK.read_text(), DEMO_LOCK.read_text()
    for name in demo:
        # the same files: every hash of an entry is the dev lock's
        entry = re.search(
            rf"^{re.escape(name)}==\S+((?: \\\n\s+--hash=\S+)+)", demo_text, re.MULTILINE | re.I
        )
        assert entry and entry.group(1) in dev_text, name
    # what the tests and the CDK app need is left out (the point of a lock of its own)
    assert not {"aws-cdk-lib", "mypy", "pytest", "pip"} & set(demo)


def test_the_demo_installs_its_own_lock_and_the_tests_the_whole_one() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    # the demo: the walk alone where its set-up is current, else the set-up of the demo's lock that
    # starts the walk itself (and touches the same stamp)
    assert re.search(
        r"^demo: \| \$\(BIN\)/python\n\t@if \$\(QUESTION\) \$\(DEMO_STAMP\); then", makefile, re.MULTILINE
    )
    assert re.search(
        r"^DEMO_SET_UP := .*-m gco\.local\.llama\.setup_env --lock \$\(DEMO_LOCK\) --stamp \$\(DEMO_STAMP\) ",
        makefile,
        re.MULTILINE,
    )
    assert "$(DEMO_SET_UP) -- $(DEMO_RUN)" in makefile
    assert re.search(r"^DEMO_LOCK := requirements/demo\.lock$", makefile, re.MULTILINE)
    stamps = {
        target: recipe
        for target, recipe in re.findall(
            r"^(\$\((?:DEMO_)?STAMP\)):.*\n((?:\t.*\n)+)", makefile, re.MULTILINE
        )
    }
    assert "-m gco.local.llama.setup_env --lock $(LOCK)" in stamps["$(STAMP)"]
    assert "-m gco.local.llama.setup_env --lock $(DEMO_LOCK)" in stamps["$(DEMO_STAMP)"]
    assert "$(DEMO_STAMP)" in stamps["$(STAMP)"]  # the whole set-up holds the demo's
    assert re.search(r"^lint: \$\(STAMP\)$", makefile, re.MULTILINE)


def engine_requirements() -> list[Requirement]:
    """What the installed llama-cpp-python asks for itself and for its `server` extra (its METADATA):
    the set-up installs the engine without the index (gco.local.llama.llama_build.install), so both
    locks must hold all of it."""
    pytest.importorskip("llama_cpp", reason="the CPU engine is not installed here")
    raw = importlib.metadata.requires("llama-cpp-python") or []
    return [
        requirement
        for requirement in map(Requirement, raw)
        if requirement.marker is None or requirement.marker.evaluate({"extra": "server"})
    ]


def test_both_locks_pin_what_the_engine_and_its_server_need_within_its_ranges() -> None:
    wanted = engine_requirements()
    assert {"uvicorn", "fastapi", "diskcache"} <= {canonicalize_name(r.name) for r in wanted}
    for lock in (LOCK, DEMO_LOCK):
        entries = locked(lock)
        for requirement in wanted:
            name = canonicalize_name(requirement.name)
            assert name in entries, f"{lock.name} does not pin {requirement} (the engine's): add it to local"
            assert requirement.specifier.contains(entries[name][0], prereleases=True), (
                lock.name,
                requirement,
            )
