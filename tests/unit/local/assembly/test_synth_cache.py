"""The local stack's assembly cache (gco.local.assembly.synth.local_assembly) with a stand-in synth: a
child that writes a manifest and the record, counting its runs. The real synth is
tests/functional/local/assembly/test_local_synth.py."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

import gco
from gco.local.assembly import synth
from gco.local.assembly.synth import LOCAL_RECORD, LocalRecord, local_assembly, project_root
from gco.local.errors import AssemblyError

HOME = "us-east-1"
# The stand-in synth: argv is the out folder, a file it appends a line to per run, its exit status,
# whether to write the record, and seconds to sleep first.
FAKE_SYNTH = """
import json, pathlib, sys, time
out, runs, status, record, sleep = sys.argv[1:6]
time.sleep(float(sleep))
with open(runs, "a") as counted:
    counted.write("run\\n")
print("fake synth output")
out = pathlib.Path(out)
(out / "manifest.json").write_text("{}")
if record == "1":
    body = {"python": sys.executable, "regions": ["r"], "home_region": "r"}
    (out / "gco-local.json").write_text(json.dumps(body))
sys.exit(int(status))
"""


class FakeSynth:
    def __init__(self, tmp_path: Path, status: int = 0, record: bool = True, sleep_s: float = 0.0) -> None:
        self.runs = tmp_path / "runs.txt"
        self.status, self.record, self.sleep_s = status, record, sleep_s

    def command(self, out: Path, regions: Sequence[str], home: str) -> list[str]:
        args = [str(out), str(self.runs), str(self.status), "1" if self.record else "0", str(self.sleep_s)]
        return [sys.executable, "-c", FAKE_SYNTH, *args]

    @property
    def count(self) -> int:
        return len(self.runs.read_text().splitlines()) if self.runs.exists() else 0


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    (root / "stacks").mkdir(parents=True)
    (root / "stacks" / "app.py").write_text("# the app\n")
    monkeypatch.setattr(synth, "project_root", lambda: root)
    monkeypatch.setattr(synth, "functions_python", lambda: "/opt/python3.13")
    return root


def use(monkeypatch: pytest.MonkeyPatch, fake: FakeSynth) -> FakeSynth:
    monkeypatch.setattr(synth, "synth_command", fake.command)
    return fake


def test_a_miss_synthesizes_once_and_a_hit_returns_the_same_folder(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = use(monkeypatch, FakeSynth(tmp_path))
    cache = tmp_path / "cache"
    first = local_assembly([HOME, "us-west-2"], HOME, cache_root=cache)
    assert fake.count == 1 and (first / LOCAL_RECORD).is_file() and first.parent == cache
    assert "fake synth output" in first.with_name(first.name + ".log").read_text()
    assert local_assembly([HOME, "us-west-2"], HOME, cache_root=cache) == first
    assert fake.count == 1
    assert [p.name for p in cache.iterdir() if p.is_dir()] == [first.name]  # no partial folder left


def test_a_changed_source_is_synthesized_again(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = use(monkeypatch, FakeSynth(tmp_path))
    first = local_assembly([HOME], HOME, cache_root=tmp_path / "cache")
    (tree / "stacks" / "app.py").write_text("# changed\n")
    assert local_assembly([HOME], HOME, cache_root=tmp_path / "cache") != first
    assert fake.count == 2


def test_the_cache_follows_xdg_cache_home(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, FakeSynth(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert local_assembly([HOME], HOME).parent == tmp_path / "xdg" / "gco" / "assembly"


@pytest.mark.parametrize(("status", "record"), [(3, True), (0, False)])
def test_a_failed_synth_raises_naming_its_log_and_keeps_nothing(
    status: int, record: bool, tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, FakeSynth(tmp_path, status=status, record=record))
    cache = tmp_path / "cache"
    with pytest.raises(AssemblyError, match=rf"exit status {status}\): see .*\.log") as raised:
        local_assembly([HOME], HOME, cache_root=cache)
    log = Path(str(raised.value).rsplit("see ", 1)[1])
    assert log.parent == cache and "fake synth output" in log.read_text()
    assert not [p for p in cache.iterdir() if p.is_dir()]


def test_concurrent_builders_synthesize_once(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = use(monkeypatch, FakeSynth(tmp_path, sleep_s=0.5))
    found: list[Path] = []

    def build() -> None:
        found.append(local_assembly([HOME], HOME, cache_root=tmp_path / "cache"))

    threads = [threading.Thread(target=build) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert fake.count == 1 and len(found) == 3 and len(set(found)) == 1


def test_only_the_most_recently_used_assemblies_are_kept(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, FakeSynth(tmp_path))
    cache = tmp_path / "cache"
    built = [local_assembly([region], region, cache_root=cache) for region in ("a", "b", "c")]
    (cache / ".partial-dead").mkdir()  # left by a builder that died
    assert local_assembly(["a"], "a", cache_root=cache) == built[0]  # a hit: now the most recent
    newest = local_assembly(["d"], "d", cache_root=cache)
    kept = {p.name for p in cache.iterdir() if p.is_dir()}
    assert kept == {built[0].name, built[2].name, newest.name}
    assert {p.name for p in cache.glob("*.log")} == {f"{name}.log" for name in kept}


def test_a_folder_without_its_record_is_built_again(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = use(monkeypatch, FakeSynth(tmp_path))
    first = local_assembly([HOME], HOME, cache_root=tmp_path / "cache")
    (first / LOCAL_RECORD).unlink()
    assert local_assembly([HOME], HOME, cache_root=tmp_path / "cache") == first
    assert fake.count == 2 and (first / LOCAL_RECORD).is_file()


def test_without_a_source_tree_it_asks_for_an_assembly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed = tmp_path / "site-packages" / "gco"
    installed.mkdir(parents=True)
    monkeypatch.setattr(gco, "__file__", str(installed / "__init__.py"))
    with pytest.raises(AssemblyError, match="--assembly DIR"):
        project_root()


def test_the_source_tree_is_the_checkout_holding_gco() -> None:
    assert (project_root() / "gco" / "local" / "assembly" / "synth.py").is_file()


def test_the_record_round_trips_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    record = LocalRecord(python="/usr/bin/python3.13", regions=("us-east-1", "us-west-2"), home_region=HOME)
    record.write(tmp_path)
    assert LocalRecord.read(tmp_path) == record
    assert json.loads((tmp_path / LOCAL_RECORD).read_text())["python"] == record.python
    (tmp_path / LOCAL_RECORD).write_text('{"python": "x"}')
    with pytest.raises(AssemblyError, match="cannot be read"):
        LocalRecord.read(tmp_path)
    with pytest.raises(AssemblyError, match="not built for the local stack"):
        LocalRecord.read(tmp_path / "elsewhere")
