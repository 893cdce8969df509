"""The run's mirror: its files in the evidence bucket as the run goes, so another machine can resume it.

After every step the run hands its checkpoint to the mirror as a new revision
(`matrix/checkpoints/<revision>.json`), and at the end its evidence files. On the GPU runner the
mirror is the runner's own folder, `s3://<bucket>/runs/<execution>/<runner id>/` (`gco matrix run
--run-uri`, which the runner passes); when that machine is lost, a later job copies the folder back
(`gpu_runner.runner.download_dir`, or `gco matrix resume s3://...`: `fetch_run`) and `gco matrix
resume` continues from the newest revision.

Every object is created once (`If-None-Match: *`): the runner's instance role may only create objects
under its folder (stacks/runner.py), so a revision is never replaced; an object that exists with the
same bytes (a retried write) is a success, with other bytes a `MirrorError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from gco import aws
from gco.validation.errors import CheckpointError, MatrixError

SCHEME = "s3://"
# Where a run given an evidence bucket and no run URI mirrors itself: `s3://<bucket>/matrix-runs/<run id>/`
# (the GPU runner passes its own folder, `runs/<execution>/<runner id>/`).
DEFAULT_PREFIX = "matrix-runs/"
# S3's answers to a conditional create whose key exists (412), or is being written meanwhile (409).
EXISTS = ("PreconditionFailed", "ConditionalRequestConflict")


class MirrorError(MatrixError):
    """A file of the run could not be written to its mirror (the run goes on; the next save retries)."""


class RunMirror(Protocol):
    """Where a run's files are copied as they are written; `put` creates `relative` once."""

    def put(self, relative: str, body: bytes) -> str: ...


def default_uri(evidence_bucket: str | None, run_id: str) -> str | None:
    """The run URI of a run given only an evidence bucket (None without one: no mirror)."""
    return f"{SCHEME}{evidence_bucket}/{DEFAULT_PREFIX}{run_id}/" if evidence_bucket else None


def parse_uri(uri: str) -> tuple[str, str]:
    """(bucket, key prefix ending in `/`) of `s3://bucket/prefix/`.

    Raises:
        MirrorError: not an s3:// URI with a bucket.
    """
    if not uri.startswith(SCHEME):
        raise MirrorError(f"{uri!r} is not an s3:// URI")
    bucket, _, prefix = uri[len(SCHEME) :].partition("/")
    if not bucket:
        raise MirrorError(f"{uri!r} names no bucket")
    return bucket, (prefix.rstrip("/") + "/") if prefix.strip("/") else ""


class S3RunMirror:
    """The run's folder in S3, each object written with If-None-Match."""

    def __init__(self, uri: str, *, client: Any = None) -> None:
        self.bucket, self.prefix = parse_uri(uri)
        self.s3 = client or aws.client("s3")

    def put(self, relative: str, body: bytes) -> str:
        """Create `<prefix><relative>`; the same bytes already there is a success. Returns the URI.

        Raises:
            MirrorError: S3 refused or could not be reached, or other bytes are there.
        """
        key = self.prefix + relative
        uri = f"{SCHEME}{self.bucket}/{key}"
        try:
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=body, IfNoneMatch="*")
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code not in EXISTS:
                raise MirrorError(f"cannot write {uri}: {code or error}") from None
            if self._read(key) != body:
                raise MirrorError(f"{uri} exists with other content: kept") from None
        except BotoCoreError as error:
            raise MirrorError(f"cannot write {uri}: {error}") from None
        return uri

    def _read(self, key: str) -> bytes:
        try:
            return bytes(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())
        except (ClientError, BotoCoreError) as error:
            raise MirrorError(f"cannot read {SCHEME}{self.bucket}/{key}: {error}") from None


def fetch_run(uri: str, directory: Path, *, client: Any = None) -> list[str]:
    """Copy every object of the run's folder at `uri` into `directory`; returns the keys copied.

    Files already in `directory` with the same names are replaced; the checkpoint read afterwards
    is the highest revision found (`checkpoint.read_checkpoint`).

    Raises:
        CheckpointError: nothing is stored there (field `RUN_DIR`).
        MirrorError: S3 refused or could not be reached, or a key would land outside `directory`.
    """
    bucket, prefix = parse_uri(uri)
    s3 = client or aws.client("s3")
    try:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        keys = [item["Key"] for page in pages for item in page.get("Contents", [])]
    except (ClientError, BotoCoreError) as error:
        raise MirrorError(f"cannot list {uri}: {error}") from None
    if not keys:
        raise CheckpointError("RUN_DIR", f"{uri} holds no run")
    root = directory.resolve()
    for key in keys:
        target = (root / key[len(prefix) :]).resolve()
        if not target.is_relative_to(root) or target == root:
            raise MirrorError(f"{SCHEME}{bucket}/{key} does not fit in the run directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            target.write_bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        except (ClientError, BotoCoreError) as error:
            raise MirrorError(f"cannot read {SCHEME}{bucket}/{key}: {error}") from None
    return keys
