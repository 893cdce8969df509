"""Evidence stores: a local directory and the S3 evidence bucket, both write-once per id.

`EvidenceStore` is the port; writing the same record twice succeeds, a different one under the id fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from gco import aws
from gco.evidence.errors import EvidenceConflictError, EvidenceStoreError
from gco.evidence.record import EvidenceRecord, validate


class EvidenceStore(Protocol):
    """Where evidence records go."""

    def put(self, record: EvidenceRecord) -> str: ...

    def get(self, record_id: str) -> EvidenceRecord: ...


def _checked(record: EvidenceRecord) -> str:
    """Seal-check and validate; returns the JSON text to store."""
    text = record.to_json()
    validate(json.loads(text))
    return text


class LocalEvidenceStore:
    """`<root>/<id>.json` files."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, record_id: str) -> Path:
        return self.root / f"{record_id}.json"

    def put(self, record: EvidenceRecord) -> str:
        """Validate and write once; returns the file path.

        Raises:
            InvalidEvidenceError: the record fails its schema.
            EvidenceConflictError: a different record already has its id.
            EvidenceStoreError: the file cannot be written.
        """
        text = _checked(record)
        target = self.path(record.id)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if target.exists():
                if target.read_text(encoding="utf-8") != text:
                    raise EvidenceConflictError(f"{target} holds a different record")
                return str(target)
            partial = target.with_suffix(".json.partial")
            partial.write_text(text, encoding="utf-8")
            partial.replace(target)
        except OSError as error:
            raise EvidenceStoreError(f"cannot write {target}: {error}") from error
        return str(target)

    def get(self, record_id: str) -> EvidenceRecord:
        """The record of `record_id`, validated.

        Raises:
            EvidenceStoreError: it cannot be read or does not parse.
        """
        try:
            return validate(json.loads(self.path(record_id).read_text(encoding="utf-8")))
        except (OSError, ValueError) as error:
            raise EvidenceStoreError(f"cannot read evidence {record_id}: {error}") from error


class S3EvidenceStore:
    """`s3://<bucket>/<prefix><kind>/<id>.json`, written with If-None-Match so an id is written once."""

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

    def key(self, record_id: str) -> str:
        return f"{self.prefix}{record_id}.json"

    def put(self, record: EvidenceRecord) -> str:
        """Validate and write once; the same content again is a success. Returns the s3:// URI.

        Raises:
            InvalidEvidenceError: the record fails its schema.
            EvidenceConflictError: a different record already has its id.
            EvidenceStoreError: S3 refused or could not be reached.
        """
        text = _checked(record)
        key = self.key(record.id)
        uri = f"s3://{self.bucket}/{key}"
        try:
            self.s3.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=text.encode(),
                ContentType="application/json",
                # No ServerSideEncryption: the bucket's default (its KMS key) applies, and the bucket
                # refuses a request that names another (stacks/constructs/data.py EvidenceBucket).
                IfNoneMatch="*",
            )
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code not in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise EvidenceStoreError(f"cannot write {uri}: {code or error}") from error
            if self._read(key) != text:
                raise EvidenceConflictError(f"{uri} holds a different record") from error
        except BotoCoreError as error:
            raise EvidenceStoreError(f"cannot write {uri}: {error}") from error
        return uri

    def _read(self, key: str) -> str:
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except (ClientError, BotoCoreError) as error:
            raise EvidenceStoreError(f"cannot read s3://{self.bucket}/{key}: {error}") from error
        return str(body.decode("utf-8"))

    def get(self, record_id: str) -> EvidenceRecord:
        """The record of `record_id`, validated.

        Raises:
            EvidenceStoreError: it cannot be read or is not JSON.
        """
        try:
            return validate(json.loads(self._read(self.key(record_id))))
        except ValueError as error:
            raise EvidenceStoreError(f"evidence {record_id} is not JSON: {error}") from error
