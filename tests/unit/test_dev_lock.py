"""requirements/dev.lock, what `make test` installs (`pip install --require-hashes`), agrees with
pyproject.toml: every requirement of the project and of its cdk, local and dev extras is pinned to a
version its range allows, with hashes; nothing is pinned as pyproject's own that pyproject no longer
asks for; and the lock's header is the command `make lock` runs. requirements/demo.lock, what `make
demo` installs, is the part of it that the dependencies and the local and cdk extras need (the local
stack synthesizes the CDK app, `python -m stacks.local_synth`, and runs its functions), at the same
pins and hashes."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shlex
import sys
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
# The extras the demo's lock resolves besides the dependencies: the local stack's servers and engine,
# and the CDK app it synthesizes to run the Lambda functions from (stacks/local_synth.py).
DEMO_EXTRAS = ("local", "cdk")
# The project's own top-level packages (not installed from a lock).
FIRST_PARTY = {"gco", "stacks", "lambdas", "gpu_runner"}


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
    extras = {option for option in options(demo) if option.startswith("--extra=")}
    assert extras == {f"--extra={extra}" for extra in DEMO_EXTRAS}


def test_the_demo_lock_is_the_dev_lock_for_the_dependencies_and_the_local_and_cdk_extras() -> None:
    dev, demo = locked(), locked(DEMO_LOCK)
    for name, (version, hashes, _) in demo.items():
        assert name in dev and dev[name][:2] == (version, hashes), f"{name}: run make lock"
    for requirement in pyproject_requirements(DEMO_EXTRAS):
        name = canonicalize_name(requirement.name)
        assert name in demo, f"{requirement} is not in {DEMO_LOCK.name}: run make lock"
        assert requirement.specifier.contains(demo[name][0], prereleases=True)
        assert DIRECT & set(demo[name][2]), f"{name}: {demo[name][2]}"
    dev_text, demo_text = LOCK.read_text(), DEMO_LOCK.read_text()
    for name in demo:
        # the same files: every hash of an entry is the dev lock's
        entry = re.search(
            rf"^{re.escape(name)}==\S+((?: \\\n\s+--hash=\S+)+)", demo_text, re.MULTILINE | re.I
        )
        assert entry and entry.group(1) in dev_text, name
    # the CDK app and what it stands on are in; what only the tests and the dev tools need is left out
    # (the point of a lock of its own)
    assert {"aws-cdk-lib", "constructs", "cdk-nag", "jsii"} <= set(demo)
    assert not {"mypy", "pytest", "pip", "pip-tools", "ruff", "boto3-stubs"} & set(demo)


def test_every_demo_entry_is_there_for_the_project_or_another_entry() -> None:
    """The demo's lock is closed: each entry is asked for by pyproject.toml (the dependencies and the
    demo's extras, checked above) or by another entry of the same lock, never by a dev tool."""
    demo = locked(DEMO_LOCK)
    for name, (version, _, via) in demo.items():
        askers = {canonicalize_name(reason.split(" ")[0]) for reason in via if reason not in DIRECT}
        assert via and askers <= set(demo), f"{name}=={version} is there for {via}: run make lock"


def imported_top_level(path: Path) -> set[str]:
    """The top-level names of every absolute import of `path` that runs (those under `if
    TYPE_CHECKING:` never do)."""
    found: set[str] = set()
    nodes: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"), str(path))]
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            nodes.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
        nodes.extend(ast.iter_child_nodes(node))
    return found


def test_the_demo_lock_pins_what_the_cdk_app_imports() -> None:
    """`python -m stacks.local_synth` runs in the demo's environment: every package the modules of
    stacks/ import (beyond the standard library and the project's own) comes from the demo's lock."""
    demo = set(locked(DEMO_LOCK))
    providers = importlib.metadata.packages_distributions()
    modules = set[str]()
    for path in sorted((ROOT / "stacks").rglob("*.py")):
        modules |= imported_top_level(path)
    third_party = modules - FIRST_PARTY - set(sys.stdlib_module_names) - {"__future__"}
    assert {"aws_cdk", "constructs", "cdk_nag", "jsii"} <= third_party
    for module in sorted(third_party):
        distributions = {canonicalize_name(name) for name in providers.get(module, [])}
        assert distributions, f"stacks/ imports {module}, which no installed distribution provides"
        assert distributions & demo, f"stacks/ imports {module} ({distributions}): not in {DEMO_LOCK.name}"


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
