"""A bundle's unzipped size, measured at synth: printed, and a bundle over the limit fails the synth."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stacks.bundle_size import BUNDLE_SIZE_LIMIT, MIB, BundleTooLargeError, check, measure
from stacks.bundling import REGIONAL, LocalPythonBundling


def write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def test_sizes_are_counted_per_package_with_their_metadata(tmp_path: Path) -> None:
    write(tmp_path / "numpy" / "core.so", 3000)
    write(tmp_path / "numpy-2.2.0.dist-info" / "RECORD", 100)
    write(tmp_path / "numpy.libs" / "libopenblas.so", 5000)
    write(tmp_path / "pydantic_core" / "_core.so", 2000)
    write(tmp_path / "reconciler.py", 10)
    os.link(tmp_path / "reconciler.py", tmp_path / "sweep.py")  # the zip stores a hard link twice
    size = measure("rollout", tmp_path)
    assert size.by_package == {"numpy": 8100, "pydantic_core": 2000, "reconciler": 10, "sweep": 10}
    assert (size.total, size.files) == (10120, 6)
    assert size.largest(2) == [("numpy", 8100), ("pydantic_core", 2000)]
    assert size.line().startswith("gco bundling: rollout: 0.0 MiB unzipped, 6 files (numpy 0.0")


def test_a_bundle_over_the_limit_is_refused_naming_its_largest_packages(tmp_path: Path) -> None:
    write(tmp_path / "scipy" / "a.so", 3 * MIB)
    write(tmp_path / "numpy" / "b.so", 2 * MIB)
    size = measure("rollout", tmp_path)
    check(size, limit=5 * MIB)
    with pytest.raises(
        BundleTooLargeError,
        match=r"rollout .* 5\.0 MiB, over gco's limit of 4 MiB.*scipy \(3\.0 MiB\), numpy",
    ):
        check(size, limit=4 * MIB)
    assert BUNDLE_SIZE_LIMIT == 200 * MIB


def test_the_synth_prints_each_bundle_s_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundling = LocalPythonBundling(bundle=REGIONAL, install_dependencies=False)
    assert bundling.try_bundle(str(tmp_path), image=None)  # type: ignore[arg-type]
    printed = capsys.readouterr().err
    assert f"gco bundling: regional: {measure('regional', tmp_path).total / MIB:.1f} MiB unzipped" in printed
