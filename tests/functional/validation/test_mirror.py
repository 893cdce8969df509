"""The run's mirror in S3 (the moto server over HTTP): each file created once, a retry of the same
bytes a success, other bytes refused."""

from __future__ import annotations

import pytest

from gco import aws
from gco.local.motoserver import MotoServer
from gco.validation.mirror import MirrorError, S3RunMirror, parse_uri

BUCKET = "gco-mirror-test"


def test_parse_uri() -> None:
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
