"""The cloud assembly the local stack runs: the app synthesized for its Regions once per source tree,
and kept.

`local_assembly(regions, home)` returns the directory of an assembly of the whole app built for the
local stack's Regions with every bundle's wheels installed (`python -m stacks.local_synth`, run in a
child process: gco imports no CDK). It is kept under `$XDG_CACHE_HOME/gco/assembly/<key>`
(`gco.local.processes.cache`), the key a digest of everything the synth reads (`assembly_key`): the
project's files that go into the app by path and content, the Regions, the home Region and the
Python the functions run with. A later call with the same key returns the kept assembly without
synthesizing (hashing about 2 MiB of source and asking the runtime's Python its version: about 30 ms);
any change to an input is a new key and a new synth (about 8 s when the bundles are in the bundling's
own cache, 20 to 30 s when they are built again from pip's cache, more when pip must download).

A synth writes into a folder beside the final one and renames it into place, so no reader sees half
an assembly; builders are serialized by a lock file in the cache (two `gco local up` at once build
once). Its output goes to `<key>.log` beside it, which the error names when it fails. The KEEP most
recently used assemblies are kept, older ones deleted.

The synth needs the source tree (`stacks/` beside `gco/`): gco installed from a wheel has none, and
the local stack must then be given an assembly (`--assembly DIR`).

Each assembly built here holds `gco-local.json` (`LocalRecord`): the interpreter its functions run
with (the Lambda runtime's Python, `FUNCTIONS_PYTHON`, where this machine has it; else the one that
ran the synth, whose bundles then carry its own wheels: stacks/bundling.py's opt-in) and the Regions.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gco
from gco.local.errors import AssemblyError
from gco.local.processes.cache import gco_cache
from gco.processes.cpython import FUNCTIONS_PYTHON, find_cpython
from gco.processes.interpreter import python_module

# What `local_assembly` writes into each assembly it builds, beside CDK's manifest.
LOCAL_RECORD = "gco-local.json"
# The app's entry point for the local stack (stacks/local_synth.py), run from the source tree.
SYNTH_MODULE = "stacks.local_synth"
# Assemblies kept in the cache: one per source tree and Regions, so a few cover switching branches.
KEEP = 3
# A synth takes tens of seconds and pip's first download of the wheels a few minutes: one that runs
# past this is stuck (a lock, a network that never answers).
SYNTH_TIMEOUT_S = 1800
# The files that go into the app, relative to the project's root: the entry point and its settings,
# the stacks, the handlers (with the lock files the bundling reads: lambdas/requirements*.txt) and
# the library the stacks and handlers import, and the project's pinned requirements.
APP_FILES = ("app.py", "cdk.json", "pyproject.toml")
APP_TREES = ("stacks", "lambdas", "gco", "requirements")
# The local stack: neither the stacks nor the bundles import it (stacks/handler_imports.py leaves it
# out), so a change to it does not change the app. This module is the exception: it defines the record.
NOT_APP = frozenset({"gco/local"})
OWN = Path(__file__).resolve().relative_to(Path(gco.__file__).resolve().parent.parent)
# What tools and interpreters write into the tree: nothing the synth reads.
SKIPPED_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
SKIPPED_SUFFIXES = (".pyc", ".pyo")
LOCK_FILE = ".lock"
PARTIAL_PREFIX = ".partial-"
LOG_SUFFIX = ".log"


@dataclass(frozen=True)
class LocalRecord:
    """What `local_assembly` records in an assembly it built (`LOCAL_RECORD`): the interpreter its
    functions run with, and the Regions it was synthesized for."""

    python: str
    regions: tuple[str, ...]
    home_region: str

    def write(self, assembly: Path) -> None:
        """Write the record into `assembly` (the synth's last step: its presence marks a whole one)."""
        body = {"python": self.python, "regions": list(self.regions), "home_region": self.home_region}
        (assembly / LOCAL_RECORD).write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def read(cls, assembly: Path) -> LocalRecord:
        """The record of an assembly `local_assembly` built.

        Raises:
            AssemblyError: `assembly` holds no record (`cdk synth`'s own output has none), or one that
                is not what this module writes.
        """
        path = assembly / LOCAL_RECORD
        try:
            body: Any = json.loads(path.read_text(encoding="utf-8"))
            return cls(str(body["python"]), tuple(map(str, body["regions"])), str(body["home_region"]))
        except FileNotFoundError:
            raise AssemblyError(f"{assembly} was not built for the local stack (no {LOCAL_RECORD})") from None
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise AssemblyError(f"{path} cannot be read: {error}") from None


def functions_python() -> str:
    """The interpreter the functions of an assembly built here run with: the Lambda runtime's Python
    where this machine has it, else this one (stacks/local_synth.py then builds the bundles for it)."""
    return find_cpython(FUNCTIONS_PYTHON) or sys.executable


def project_root() -> Path:
    """The source tree the app is synthesized from: the folder holding gco's package and `stacks/`.

    Raises:
        AssemblyError: there is no `stacks/` beside gco (gco installed from a wheel).
    """
    root = Path(gco.__file__).resolve().parent.parent
    if not (root / "stacks" / "local_synth.py").is_file() or not (root / "cdk.json").is_file():
        raise AssemblyError(
            f"no source tree to synthesize the app from (no stacks/ and cdk.json beside {root / 'gco'}): "
            "synthesize it from a checkout and pass the assembly with --assembly DIR, or run the "
            "functions of the installed package with --from-source"
        )
    return root


def key_inputs(root: Path) -> list[Path]:
    """Every file of `root` that goes into the app (see APP_FILES and APP_TREES), relative, sorted."""
    found = {Path(name) for name in (*APP_FILES, OWN) if (root / name).is_file()}
    for tree in APP_TREES:
        found.update(_tree_files(root, tree))
    return sorted(found)


def _tree_files(root: Path, tree: str) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root / tree):
        here = Path(folder).relative_to(root)
        # pruned in place: os.walk then does not descend into them
        dirs[:] = sorted(
            name
            for name in dirs
            if name not in SKIPPED_DIRS
            and not name.endswith(".egg-info")
            and (here / name).as_posix() not in NOT_APP
        )
        yield from (here / name for name in files if not name.endswith(SKIPPED_SUFFIXES))


def assembly_key(root: Path, regions: Sequence[str], home: str, python: str) -> str:
    """The digest naming an assembly: every `key_inputs` file by path and content, the Regions in
    their order, the home Region and the interpreter the functions run with."""
    digest = hashlib.sha256()
    for part in (",".join(regions), home, python):
        digest.update(part.encode() + b"\0")
    for relative in key_inputs(root):
        body = (root / relative).read_bytes()
        # the length bounds each body: no two trees hash the same by moving bytes between files
        digest.update(f"{relative.as_posix()}\0{len(body)}\0".encode() + body)
    return digest.hexdigest()[:32]


def local_assembly(regions: Sequence[str], home: str, *, cache_root: Path | None = None) -> Path:
    """The assembly of the app for `regions` (home Region `home`), synthesized on the first call for
    this source tree and kept (see the module's docstring).

    Raises:
        AssemblyError: no source tree to synthesize from, or the synth failed (the message names its log).
    """
    root = project_root()
    cache = cache_root or gco_cache("assembly")
    final = cache / assembly_key(root, regions, home, functions_python())
    if _complete(final):
        _touch(final)
        return final
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / LOCK_FILE):
        if not _complete(final):  # another builder may have made it while this one waited for the lock
            _build(root, final, regions, home)
        _touch(final)
        prune(cache, KEEP)
    return final


def synth_command(out: Path, regions: Sequence[str], home: str) -> list[str]:
    """The child that synthesizes the app into `out`, safe from its working directory
    (`python_module`): it finds the project's `stacks` (installed as no package) on PYTHONPATH (`_run`)."""
    return python_module(
        SYNTH_MODULE, "--out", str(out), "--regions", ",".join(regions), "--home-region", home
    )


def _build(root: Path, final: Path, regions: Sequence[str], home: str) -> None:
    """Synthesize into a folder beside `final`, then rename it into place.

    Raises:
        AssemblyError: the synth could not start, failed, timed out or left no record.
    """
    shutil.rmtree(final, ignore_errors=True)  # a folder without its record is not one of ours
    log = final.with_name(final.name + LOG_SUFFIX)
    partial = Path(tempfile.mkdtemp(prefix=PARTIAL_PREFIX, dir=final.parent))
    try:
        status = _run(synth_command(partial, regions, home), root, log)
        if status != 0 or not _complete(partial):
            raise AssemblyError(
                f"the synth of the app for the local stack failed (exit status {status}): see {log}"
            )
        partial.rename(final)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _run(command: list[str], root: Path, log: Path) -> int:
    """Run `command` in `root` with `root` first on PYTHONPATH, its output to `log`; its exit status.

    Raises:
        AssemblyError: it could not start, or ran past SYNTH_TIMEOUT_S.
    """
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    try:
        with log.open("w", encoding="utf-8") as out:
            done = subprocess.run(
                command,
                cwd=root,
                env={**os.environ, "PYTHONPATH": path},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=SYNTH_TIMEOUT_S,
                check=False,
            )
    except subprocess.TimeoutExpired:
        raise AssemblyError(f"the synth of the app ran past {SYNTH_TIMEOUT_S} s: see {log}") from None
    except OSError as error:
        raise AssemblyError(f"the synth of the app could not start ({error}): see {log}") from None
    return done.returncode


def _complete(assembly: Path) -> bool:
    """Whether `assembly` is a whole one: the synth writes the record after CDK's manifest."""
    return (assembly / LOCAL_RECORD).is_file() and (assembly / "manifest.json").is_file()


def _touch(assembly: Path) -> None:
    """Mark `assembly` used now: `prune` keeps the most recently used. A cache that cannot be written
    costs only a later rebuild."""
    with contextlib.suppress(OSError):
        os.utime(assembly)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (waiting for another builder to release it)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prune(cache: Path, keep: int) -> None:
    """Keep the `keep` most recently used assemblies in `cache` and their logs; delete the rest, and
    what a builder that died left (a partial folder, a folder without its record). Called with the
    cache's lock held: no other builder is writing."""
    folders = [p for p in cache.iterdir() if p.is_dir()]
    whole = sorted((p for p in folders if _complete(p)), key=lambda p: p.stat().st_mtime, reverse=True)
    kept = {p.name for p in whole[:keep]}
    for folder in folders:
        if folder.name not in kept:
            shutil.rmtree(folder, ignore_errors=True)
    for log in cache.glob(f"*{LOG_SUFFIX}"):
        if log.name.removesuffix(LOG_SUFFIX) not in kept:
            log.unlink(missing_ok=True)
