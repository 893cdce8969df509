"""`gco.inputs.input_files`: a file a user names is read only when regular, bounded, never waited on."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from gco.errors import GcoInputError
from gco.inputs import input_files


def refused(path: Path | str, max_bytes: int = 1024) -> str:
    with pytest.raises(GcoInputError) as caught:
        input_files.read_bounded(Path(path), "--spec", max_bytes)
    assert caught.value.field == "--spec"
    return caught.value.message


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    assert refused(fifo) == f"{fifo} is a FIFO, not a regular file"


def test_dev_zero_is_refused_as_a_device() -> None:
    assert refused("/dev/zero") == "/dev/zero is a character device, not a regular file"


def test_a_directory_is_refused(tmp_path: Path) -> None:
    assert refused(tmp_path) == f"{tmp_path} is a directory, not a regular file"


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        assert refused(path) == f"cannot read {path}: No such device or address"  # open(2)'s ENXIO


def test_a_regular_file_is_read_up_to_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("x" * 10, encoding="utf-8")
    assert input_files.read_bounded(path, "--spec", 10) == "x" * 10
    assert refused(path, 9) == f"{path} is larger than 9 bytes"


def test_a_missing_file_and_bad_bytes_are_named(tmp_path: Path) -> None:
    assert "No such file" in refused(tmp_path / "missing")
    path = tmp_path / "b.yaml"
    path.write_bytes(b"\xff\xfe")
    assert "not UTF-8" in refused(path)


def test_documents_are_parsed_by_their_suffix(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"replicas": 10}', encoding="utf-8")
    (tmp_path / "a.yaml").write_text("replicas: 1:30", encoding="utf-8")
    assert input_files.load_document(tmp_path / "a.json", "--spec", 100) == {"replicas": 10}
    assert input_files.load_document(tmp_path / "a.yaml", "--spec", 100) == {"replicas": "1:30"}
