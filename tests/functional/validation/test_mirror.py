"""The run's mirror in S3 (the moto server over HTTP): each file created once, a retry of the same
bytes a success, other bytes refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from gco import aws
from gco.local.moto.motoserver import MotoServer
from gco.validation.errors import CheckpointError
from gco.validation.mirror import MirrorError, S3RunMirror, default_uri, fetch_run, parse_uri

BUCKET = "gco-mirror-test"


def test_parse_uri_and_the_default_folder() -> None:
    assert default_uri("b", "r1") == "s3://b/matrix-runs/r1/" and default_uri(None, "r1") is None
    assert parse_uri("s3://b/runs/e/r") == ("b", "runs/e/r/")
    assert parse_uri("s3://b/runs/e/r/") == ("b", "runs/e/r/")
    assert parse_uri("s3://b") == ("b", "")
    for bad in ("b/runs", "https://b/x", "s3:///x"):
        with pytest.raises(MirrorError):
            parse_uri(bad)


def test_files_are_created_once(moto: MotoServer) -> None:
    s3 = aws.client("s3", endpoint_url=moto.url)
    s3.create_bucket(Bucket=BUCKET)
    mirror = S3RunMirror(f"s3://{BUCKET}/runs/e/r/", client=s3)
    uri = mirror.put("matrix/checkpoints/00000001.json", b"one")
    assert uri == f"s3://{BUCKET}/runs/e/r/matrix/checkpoints/00000001.json"
    assert mirror.put("matrix/checkpoints/00000001.json", b"one") == uri  # a retried write
    with pytest.raises(MirrorError, match="exists with other content"):
        mirror.put("matrix/checkpoints/00000001.json", b"two")
    body = s3.get_object(Bucket=BUCKET, Key="runs/e/r/matrix/checkpoints/00000001.json")["Body"].read()
    assert body == b"one"
    with pytest.raises(MirrorError, match="cannot write"):
        S3RunMirror("s3://no-such-bucket/x/", client=s3).put("a", b"a")


def test_fetch_run_copies_the_folder_and_refuses_an_empty_one(moto: MotoServer, tmp_path: Path) -> None:
    s3 = aws.client("s3", endpoint_url=moto.url)
    s3.create_bucket(Bucket=BUCKET)
    mirror = S3RunMirror(f"s3://{BUCKET}/runs/e/r/", client=s3)
    mirror.put("matrix/checkpoints/00000001.json", b"one")
    mirror.put("evidence/x.json", b"{}")
    keys = fetch_run(f"s3://{BUCKET}/runs/e/r/", tmp_path / "copy", client=s3)
    assert sorted(keys) == ["runs/e/r/evidence/x.json", "runs/e/r/matrix/checkpoints/00000001.json"]
    assert (tmp_path / "copy" / "matrix" / "checkpoints" / "00000001.json").read_bytes() == b"one"
    with pytest.raises(CheckpointError, match="holds no run"):
        fetch_run(f"s3://{BUCKET}/runs/none/", tmp_path / "other", client=s3)
