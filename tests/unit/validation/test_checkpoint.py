"""The checkpoint read back after a machine was lost: the highest revision of those found."""

from __future__ import annotations

from pathlib import Path

import pytest

from gco.validation.checkpoint import (
    CHECKPOINT,
    Checkpoint,
    checkpoint_bytes,
    read_checkpoint,
    revision_path,
    write_checkpoint,
)
from gco.validation.errors import CheckpointError


def _checkpoint(revision: int) -> Checkpoint:
    return Checkpoint(
        run_id="r1", settings_path="/s.json", identity={}, created_at="t", endpoints=[], revision=revision
    )


def _keep(run_dir: Path, checkpoint: Checkpoint) -> None:
    """What a copy from the bucket holds: the mirrored revision files."""
    path = run_dir / revision_path(checkpoint.revision)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(checkpoint_bytes(checkpoint))


def test_a_copy_with_only_revisions_reads_the_newest(tmp_path: Path) -> None:
    for revision in (1, 2, 10):  # 10 sorts after 2: names are zero-padded
        _keep(tmp_path, _checkpoint(revision))
    assert not (tmp_path / CHECKPOINT).exists()
    assert read_checkpoint(tmp_path).revision == 10


def test_checkpoint_json_and_revisions_the_highest_wins(tmp_path: Path) -> None:
    _keep(tmp_path, _checkpoint(3))
    write_checkpoint(tmp_path, _checkpoint(5))
    assert read_checkpoint(tmp_path).revision == 5
    _keep(tmp_path, _checkpoint(7))  # a later machine's revision copied beside an older checkpoint.json
    assert read_checkpoint(tmp_path).revision == 7


def test_no_checkpoint_or_a_broken_one_names_the_run_dir(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"^RUN_DIR: no checkpoint at "):
        read_checkpoint(tmp_path)
    broken = tmp_path / revision_path(1)
    broken.parent.mkdir(parents=True)
    broken.write_text("{}", encoding="utf-8")
    with pytest.raises(CheckpointError, match="is not a matrix checkpoint"):
        read_checkpoint(tmp_path)
