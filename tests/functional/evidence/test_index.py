"""The evidence index: one object per (Region, digest) of a passing matrix run, created once, read
with one GET and checked against the record it names. S3 is the moto server over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gco import aws
from gco.evidence import EvidenceStoreError, LocalEvidenceStore, S3EvidenceStore
from gco.evidence.index import EvidenceIndex, IndexEntry, LocalEvidenceIndex, S3EvidenceIndex, index_key
from gco.local.moto.motoserver import MotoServer
from tests.unit.evidence.matrix_sample import TGI, VLLM, matrix_record

BUCKET = "gco-evidence"


def both(tmp_path: Path, moto: MotoServer) -> list[tuple[Any, EvidenceIndex]]:
    s3 = aws.client("s3", endpoint_url=moto.url)
    s3.create_bucket(Bucket=BUCKET)
    local = tmp_path / "evidence"
    return [
        (LocalEvidenceStore(local), LocalEvidenceIndex(local)),
        (S3EvidenceStore(BUCKET, client=s3), S3EvidenceIndex(BUCKET, client=s3)),
    ]


def test_a_passing_run_is_found_by_digest_and_region(tmp_path: Path, moto: MotoServer) -> None:
    for store, index in both(tmp_path, moto):
        passed = matrix_record()
        store.put(passed)
        assert len(index.add(passed)) == 2
        assert index.find("us-east-1", VLLM) == passed.id
        assert index.find("us-east-1", TGI) == passed.id
        assert index.find("us-west-2", VLLM) is None  # validated in one Region only
        assert index.find("us-east-1", "sha256:" + "c" * 64) is None  # another build


def test_a_failing_run_is_not_indexed_and_the_first_pass_stays(tmp_path: Path, moto: MotoServer) -> None:
    for store, index in both(tmp_path, moto):
        failed = matrix_record("fail", region="eu-west-1")
        store.put(failed)
        assert index.add(failed) == []
        assert index.find("eu-west-1", VLLM) is None
        first, second = matrix_record(summary="first"), matrix_record(summary="second")
        for record in (first, second):
            store.put(record)
            index.add(record)  # the second finds the objects there: created once, kept
        assert index.find("us-east-1", VLLM) == first.id


def test_an_entry_whose_record_does_not_vouch_admits_nothing(tmp_path: Path, moto: MotoServer) -> None:
    s3 = aws.client("s3", endpoint_url=moto.url)
    s3.create_bucket(Bucket=BUCKET)
    index = S3EvidenceIndex(BUCKET, client=s3)
    other = matrix_record(region="us-west-2")  # names the digest in another Region only
    S3EvidenceStore(BUCKET, client=s3).put(other)
    entry = IndexEntry(
        region="us-east-1", digest=VLLM, evidence_id=other.id, image="x", framework="vllm", created_at="t"
    )
    body = entry.model_dump_json()
    s3.put_object(Bucket=BUCKET, Key="evidence/" + index_key("us-east-1", VLLM), Body=body.encode())
    assert index.find("us-east-1", VLLM) is None
    missing = body.replace(other.id, "e" * 64)
    s3.put_object(Bucket=BUCKET, Key="evidence/" + index_key("us-east-1", TGI), Body=missing.encode())
    with pytest.raises(EvidenceStoreError, match="cannot read"):
        index.find("us-east-1", TGI)  # an entry without its record is an error, never an admission
    s3.put_object(Bucket=BUCKET, Key="evidence/" + index_key("eu-west-1", TGI), Body=b"{}")
    with pytest.raises(EvidenceStoreError, match="is not an index entry"):
        index.find("eu-west-1", TGI)


def test_s3_index_errors_are_converted(moto: MotoServer) -> None:
    index = S3EvidenceIndex("no-such-bucket", endpoint_url=moto.url)
    with pytest.raises(EvidenceStoreError, match="NoSuchBucket"):
        index.add(matrix_record())
    with pytest.raises(EvidenceStoreError):
        index.find("us-east-1", VLLM)
