"""requirements/dev.lock, what `make` installs (`pip install --require-hashes`), agrees with pyproject.toml:
every requirement of the project and of its cdk and dev extras is pinned to a version its range allows,
with hashes; nothing is pinned as pyproject's own that pyproject no longer asks for; and the lock's
header is the command `make lock` runs."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "dev.lock"
ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)")
# pip-compile's annotations of a package that pyproject.toml asks for itself (`gco`: through the dev
# extra's `gco[cdk]`).
DIRECT = {"gco (pyproject.toml)", "gco"}


def pyproject_requirements() -> list[Requirement]:
    """The project's dependencies and those of its `cdk` and `dev` extras, without its references to
    itself (`gco[cdk]`). The `llama` extra is built by gco.local.llama.llama_build, not locked."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    raw = [*project["dependencies"], *project["optional-dependencies"]["cdk"]]
    raw += project["optional-dependencies"]["dev"]
    return [r for r in map(Requirement, raw) if canonicalize_name(r.name) != "gco"]


def locked() -> dict[str, tuple[str, int, list[str]]]:
    """name -> (version, number of hashes, what it is there for) of every entry of the lock."""
    entries: dict[str, tuple[str, int, list[str]]] = {}
    current: str = ""
    for line in LOCK.read_text(encoding="utf-8").splitlines():
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


def test_the_header_is_the_command_make_lock_runs() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^lock:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, "the Makefile has a lock target"
    command = shlex.split(recipe.group(1).replace("\\\n", " ").replace("$(BIN)/", "").replace("$(LOCK)", ""))
    header = next(line for line in LOCK.read_text().splitlines() if line.startswith("#    pip-compile "))
    recorded = shlex.split(header.lstrip("# "))
    assert command[0] == recorded[0] == "pip-compile"

    def options(argv: list[str]) -> set[str]:
        # pip-compile writes `--flag=value` and leaves --quiet and --upgrade (how, not what) out.
        found, rest = set(), iter(argv[1:])
        for item in rest:
            if item in ("--quiet", "--upgrade", "--output-file"):
                continue
            option = f"{item}={next(rest)}" if item in ("--extra", "--unsafe-package") else item
            found.add(option.removeprefix("--output-file=").replace("requirements/dev.lock", ""))
        return found - {""}

    assert options(command) == options(recorded)
