"""Evidence stores: local directory and S3 (moto server over HTTP), both write-once per id."""

from __future__ import annotations

from pathlib import Path

import pytest

from gco import aws
from gco.evidence import EvidenceConflictError, EvidenceStoreError, LocalEvidenceStore, S3EvidenceStore
from gco.local.moto.motoserver import MotoServer
from tests.unit.evidence.test_record import record


def test_local_store_writes_once(tmp_path: Path) -> None:
    store = LocalEvidenceStore(tmp_path / "evidence")
    sealed = record()
    path = store.put(sealed)
    assert Path(path).name == f"{sealed.id}.json"
    assert store.put(sealed) == path
    assert store.get(sealed.id) == sealed
    Path(path).write_text(record(summary="changed").to_json(), encoding="utf-8")
    with pytest.raises(EvidenceConflictError):
        store.put(sealed)
    with pytest.raises(EvidenceStoreError):
        store.get("0" * 64)


def test_s3_store_writes_once_and_reads_back(moto: MotoServer) -> None:
    s3 = aws.client("s3", endpoint_url=moto.url)
    s3.create_bucket(Bucket="gco-evidence")
    store = S3EvidenceStore("gco-evidence", endpoint_url=moto.url)
    sealed = record()
    uri = store.put(sealed)
    assert uri == f"s3://gco-evidence/evidence/{sealed.id}.json"
    assert store.put(sealed) == uri
    assert store.get(sealed.id) == sealed
    # No encryption named by the client: the bucket's default (its KMS key in AWS) applies.
    assert "ServerSideEncryption" not in s3.head_object(Bucket="gco-evidence", Key=store.key(sealed.id))
    other = record(summary="other")
    s3.put_object(Bucket="gco-evidence", Key=store.key(other.id), Body=b"{}")
    with pytest.raises(EvidenceConflictError):
        store.put(other)


def test_s3_errors_are_converted(moto: MotoServer) -> None:
    store = S3EvidenceStore("no-such-bucket", endpoint_url=moto.url)
    with pytest.raises(EvidenceStoreError, match="NoSuchBucket"):
        store.put(record())
    with pytest.raises(EvidenceStoreError):
        store.get("0" * 64)
