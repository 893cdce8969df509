"""The evidence index: is there passing matrix evidence for image digest D in Region R, and which.

One small object per (Region, digest) is written beside the evidence when a matrix run passes
(`index/matrix/<region>/sha256-<hex>.json` under the evidence prefix), created once
(`If-None-Match: *` in S3, `O_EXCL` on disk): the first passing run's evidence id stays, a later
one finds it there. So a check is one GET of a known key, never a listing of the bucket; the
record it names is then read and checked (kind `matrix`, verdict pass, the digest and Region among
its validated builds), so an index object without the record behind it admits nothing.

In AWS the objects live under `evidence/`, where the bucket's policy already refuses any write
without `If-None-Match` (stacks/constructs/data.py) and the GPU runner's role may create objects,
so the runner that ran the matrix writes its index with no new grant.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gco import aws
from gco.evidence.builds import BUILDS_KEY, DIGEST_PATTERN, MATRIX_KIND, REGION_PATTERN, ValidatedBuilds
from gco.evidence.errors import EvidenceConflictError, EvidenceStoreError
from gco.evidence.record import EvidenceRecord
from gco.evidence.store import EvidenceStore, LocalEvidenceStore, S3EvidenceStore

INDEX_DIR = "index/matrix"
PASS = "pass"  # noqa: S105 - the matrix verdict, not a password
# S3's answers to a conditional create whose key exists (412), or is being written meanwhile (409):
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html
EXISTS = ("PreconditionFailed", "ConditionalRequestConflict")


class IndexEntry(BaseModel):
    """What one index object holds: the evidence that validated `digest` in `region`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str = Field(pattern=REGION_PATTERN)
    digest: str = Field(pattern=DIGEST_PATTERN)
    evidence_id: str = Field(pattern=r"^[0-9a-f]{64}$")
    image: str
    framework: str
    created_at: str


def index_key(region: str, digest: str) -> str:
    """The index object's key under the evidence prefix (or path under the evidence directory)."""
    return f"{INDEX_DIR}/{region}/{digest.replace(':', '-')}.json"


def entries_of(record: EvidenceRecord) -> list[IndexEntry]:
    """The index entries a passing matrix record stands for; none for any other record."""
    if record.kind != MATRIX_KIND or record.data.get("verdict") != PASS or BUILDS_KEY not in record.data:
        return []
    builds = ValidatedBuilds.model_validate(record.data[BUILDS_KEY])
    return [
        IndexEntry(
            region=builds.region,
            digest=image.digest,
            evidence_id=record.id,
            image=image.image,
            framework=image.framework,
            created_at=record.created_at,
        )
        for image in builds.images
    ]


def vouches(record: EvidenceRecord, region: str, digest: str) -> bool:
    """Whether `record` is passing matrix evidence of `digest` in `region`."""
    return any(e.region == region and e.digest == digest for e in entries_of(record))


class EvidenceIndex(Protocol):
    """The port: add the entries of a passing run; find the evidence of a (Region, digest)."""

    def add(self, record: EvidenceRecord) -> list[str]: ...

    def find(self, region: str, digest: str) -> str | None: ...


def _parse(text: str | bytes, where: str) -> IndexEntry:
    try:
        return IndexEntry.model_validate_json(text)
    except ValidationError as error:
        raise EvidenceStoreError(f"{where} is not an index entry: {error.errors()[0]['msg']}") from None


def _checked(store: EvidenceStore, entry: IndexEntry, region: str, digest: str) -> str | None:
    """The entry's evidence id once its record is read back and vouches for (Region, digest)."""
    record = store.get(entry.evidence_id)
    return record.id if vouches(record, region, digest) else None


class LocalEvidenceIndex:
    """`<root>/index/matrix/<region>/sha256-<hex>.json` beside a `LocalEvidenceStore(root)`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = LocalEvidenceStore(root)

    def add(self, record: EvidenceRecord) -> list[str]:
        """Create the index files of a passing matrix record (an existing one is kept).

        Returns:
            The paths created or already there.

        Raises:
            EvidenceStoreError: a file cannot be written.
        """
        written = []
        for entry in entries_of(record):
            path = self.root / index_key(entry.region, entry.digest)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                written.append(str(path))  # the first passing run's entry stays
                continue
            except OSError as error:
                raise EvidenceStoreError(f"cannot write {path}: {error}") from error
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(entry.model_dump_json())
            written.append(str(path))
        return written

    def find(self, region: str, digest: str) -> str | None:
        """The id of passing evidence of `digest` in `region`, or None.

        Raises:
            EvidenceStoreError: an index file or its record cannot be read.
        """
        path = self.root / index_key(region, digest)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as error:
            raise EvidenceStoreError(f"cannot read {path}: {error}") from error
        return _checked(self.store, _parse(text, str(path)), region, digest)


class S3EvidenceIndex:
    """`s3://<bucket>/<prefix>index/matrix/<region>/sha256-<hex>.json`, created with If-None-Match.

    Stand-in in tests: the moto server's S3 over HTTP (tests/functional/evidence/test_index.py).
    """

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "evidence/",
        region: str | None = None,
        endpoint_url: str | None = None,
        client: Any = None,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix
        self.s3 = client or aws.client("s3", region=region, endpoint_url=endpoint_url)
        self.store = S3EvidenceStore(bucket, prefix=prefix, client=self.s3)

    def add(self, record: EvidenceRecord) -> list[str]:
        """Create the index objects of a passing matrix record; an existing one is kept.

        Returns:
            The s3:// URIs created or already there.

        Raises:
            EvidenceStoreError: S3 refused or could not be reached.
            EvidenceConflictError: an object there names other evidence for another digest or Region.
        """
        written = []
        for entry in entries_of(record):
            key = self.prefix + index_key(entry.region, entry.digest)
            uri = f"s3://{self.bucket}/{key}"
            try:
                self.s3.put_object(
                    Bucket=self.bucket,
                    Key=key,
                    Body=entry.model_dump_json().encode(),
                    ContentType="application/json",
                    IfNoneMatch="*",
                )
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code", "")
                if code not in EXISTS:
                    raise EvidenceStoreError(f"cannot write {uri}: {code or error}") from error
                kept = self._entry(key)
                if kept is None or (kept.region, kept.digest) != (entry.region, entry.digest):
                    raise EvidenceConflictError(f"{uri} holds another entry") from error
            except BotoCoreError as error:
                raise EvidenceStoreError(f"cannot write {uri}: {error}") from error
            written.append(uri)
        return written

    def _entry(self, key: str) -> IndexEntry | None:
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            if code in ("NoSuchKey", "404"):
                return None
            # GetObject of a missing key answers 403, not 404, to a caller without s3:ListBucket
            # ("If you don't have the s3:ListBucket permission, Amazon S3 returns an HTTP status code
            # 403", the GetObject API reference): never taken for "no evidence", named instead.
            hint = (
                " (a missing key reads as AccessDenied without s3:ListBucket)"
                if code == "AccessDenied"
                else ""
            )
            raise EvidenceStoreError(f"cannot read s3://{self.bucket}/{key}: {error}{hint}") from error
        except BotoCoreError as error:
            raise EvidenceStoreError(f"cannot read s3://{self.bucket}/{key}: {error}") from error
        return _parse(body, f"s3://{self.bucket}/{key}")

    def find(self, region: str, digest: str) -> str | None:
        """The id of passing evidence of `digest` in `region` (one GET, then its record's), or None.

        Raises:
            EvidenceStoreError: S3 refused or could not be reached, or an object does not parse.
        """
        entry = self._entry(self.prefix + index_key(region, digest))
        return None if entry is None else _checked(self.store, entry, region, digest)
