"""Every `python -m` child gco starts runs from any working directory: run from a folder that holds a
`gco/` package of its own, each imports the installed gco, not that folder (`-P`,
`gco.processes.launch.PYTHON`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gco
from gco import __version__
from gco.bench.rounds.measure import _gco
from gco.local.demo.demo import _run_gco
from gco.local.region.engines import FAKE_ENGINE, LLAMA_ENGINE
from gco.processes.interpreter import PYTHON, python_module

DECOY = "the decoy gco package was imported"
ROOT = Path(gco.__file__).parent.parent


@pytest.fixture
def decoy(tmp_path: Path) -> Path:
    """A working directory holding a `gco/` package that fails loudly when imported."""
    package = tmp_path / "gco"
    package.mkdir()
    (package / "__init__.py").write_text(f"raise SystemExit({DECOY!r})\n", encoding="utf-8")
    return tmp_path


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_plain_python_m_imports_the_decoy(decoy: Path) -> None:
    """What went wrong: `python -m` puts the working directory first on sys.path."""
    plain = run([sys.executable, "-m", "gco.cli", "--version"], decoy)
    assert plain.returncode != 0 and DECOY in plain.stderr


@pytest.mark.parametrize(
    "argv",
    [
        python_module("gco.cli", "--version"),
        [*FAKE_ENGINE, "--help"],
        python_module("gco.local.moto.moto_app", "--help"),
        python_module("gco.local.region.node", "--help"),
        python_module("gco.local.standin.process", "--help"),
    ],
    ids=lambda argv: argv[3],
)
def test_a_child_runs_from_a_directory_holding_a_decoy_gco(argv: list[str], decoy: Path) -> None:
    child = run(argv, decoy)
    assert child.returncode == 0 and DECOY not in child.stderr, child.stderr


def test_the_demos_gco_commands_run_from_a_directory_holding_a_decoy_gco(
    decoy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(decoy)
    done = _run_gco(["--version"], dict(os.environ), lambda _: None)
    assert done.returncode == 0 and __version__ in done.stdout, done.stderr


def test_every_python_child_is_started_safe_from_its_working_directory() -> None:
    """No module of gco or stacks starts `sys.executable` with `-m` or `-c` but through `PYTHON`."""
    assert PYTHON[1] == "-P" and LLAMA_ENGINE[:2] == PYTHON and _gco("serve")[:2] == list(PYTHON)
    unsafe = re.compile(r"sys\.executable,\s*\"-[mc]\"")
    found = [
        str(path.relative_to(ROOT))
        for folder in ("gco", "stacks")
        for path in (ROOT / folder).rglob("*.py")
        if unsafe.search(path.read_text(encoding="utf-8"))
    ]
    assert found == []
