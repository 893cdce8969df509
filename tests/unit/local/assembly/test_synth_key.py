"""The key of the local stack's cached assembly (gco.local.assembly.synth.assembly_key): every file
that goes into the app, by path and content, the Regions, the home Region and the functions' Python;
nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from gco.local.assembly.synth import OWN, assembly_key, key_inputs

REGIONS, HOME, PYTHON = ("us-east-1", "us-west-2"), "us-east-1", "/usr/bin/python3.13"
# A small project tree with a file of every kind the app is made from.
APP = (
    "app.py",
    "cdk.json",
    "pyproject.toml",
    "stacks/regional.py",
    "stacks/nag/rules.json",
    "lambdas/reconciler.py",
    "lambdas/requirements.txt",
    "lambdas/requirements-regional.txt",
    "gco/__init__.py",
    "gco/reconcile/runtime.py",
    "requirements/dev.lock",
    OWN.as_posix(),
)
# What the app never reads: the local stack, caches, tests, docs.
NOT_APP = (
    "gco/local/stack.py",
    "gco/local/region/poller.py",
    "gco/__pycache__/x.cpython-311.pyc",
    "gco/reconcile/stale.pyc",
    "stacks/.mypy_cache/3.11/x.json",
    "gco.egg-info/PKG-INFO",
    "gco/thing.egg-info/PKG-INFO",
    "tests/unit/test_x.py",
    "docs/local.md",
    "README.md",
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for relative in (*APP, *NOT_APP):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(f"# {relative}\n")
    return tmp_path


def key(root: Path) -> str:
    return assembly_key(root, REGIONS, HOME, PYTHON)


def test_the_inputs_are_the_app_s_files_and_nothing_else(tree: Path) -> None:
    assert {path.as_posix() for path in key_inputs(tree)} == set(APP)


def test_the_same_tree_gives_the_same_key(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    copy = tmp_path_factory.mktemp("copy")
    for relative in APP:
        (copy / relative).parent.mkdir(parents=True, exist_ok=True)
        (copy / relative).write_bytes((tree / relative).read_bytes())
    assert key(tree) == key(copy)  # by relative path: where the checkout is does not count
    assert len(key(tree)) == 32


@pytest.mark.parametrize("relative", APP)
def test_a_changed_file_of_the_app_changes_the_key(tree: Path, relative: str) -> None:
    before = key(tree)
    (tree / relative).write_text("# changed\n")
    assert key(tree) != before


@pytest.mark.parametrize("relative", NOT_APP)
def test_a_file_the_app_never_reads_leaves_the_key(tree: Path, relative: str) -> None:
    before = key(tree)
    (tree / relative).write_text("# changed\n")
    assert key(tree) == before


def test_a_new_module_changes_the_key(tree: Path) -> None:
    """An untracked file the app may import counts as much as a tracked one."""
    before = key(tree)
    (tree / "gco" / "reconcile" / "new.py").write_text("")
    assert key(tree) != before


def test_a_renamed_file_changes_the_key(tree: Path) -> None:
    before = key(tree)
    (tree / "stacks" / "regional.py").rename(tree / "stacks" / "regional_stack.py")
    assert key(tree) != before


def test_bytes_moved_from_one_file_to_the_next_change_the_key(tree: Path) -> None:
    (tree / "app.py").write_text("ab")
    (tree / "cdk.json").write_text("c")
    before = key(tree)
    (tree / "app.py").write_text("a")
    (tree / "cdk.json").write_text("bc")
    assert key(tree) != before


def test_the_regions_the_home_region_and_the_python_each_change_the_key(tree: Path) -> None:
    keys = {
        key(tree),
        assembly_key(tree, ("us-east-1",), HOME, PYTHON),
        assembly_key(tree, tuple(reversed(REGIONS)), HOME, PYTHON),
        assembly_key(tree, REGIONS, "us-west-2", PYTHON),
        assembly_key(tree, REGIONS, HOME, "/usr/bin/python3.11"),
    }
    assert len(keys) == 5


def test_every_lock_the_bundling_reads_is_an_input() -> None:
    from stacks.bundling import BUNDLES, ROOT

    inputs = set(key_inputs(ROOT))
    assert {Path(bundle.lock) for bundle in BUNDLES} <= inputs
    assert {
        Path("app.py"),
        Path("cdk.json"),
        Path("stacks/local_synth.py"),
        Path("stacks/bundling.py"),
    } <= inputs
    assert not any(path.is_relative_to("gco/local") for path in inputs - {OWN})
