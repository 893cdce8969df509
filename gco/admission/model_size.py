"""A model's size read from its source, and the refusal of a model no GPU node here can hold.

The serving pod asks node storage for `model_size_gib` (gco.reconcile.node_storage). A spec that gives no size
gets one here, at `gco inference deploy|update`, before anything is written, so the record carries
the size the reconciler renders the pod's ephemeral-storage request and `emptyDir` limit from:

- `model_source` (`s3://bucket/prefix`): the sum of the sizes of the objects the init container's
  `aws s3 sync` copies. The sync lists the source as a directory, `prefix/` (awscli's
  `FileFormat.s3_format` appends the `/` for a directory operation), so the same prefix is listed
  with ListObjectsV2, page by page (a page holds at most 1,000 keys; `IsTruncated` and
  `NextContinuationToken` lead to the next: docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html),
  with the caller's IAM identity (`s3:ListBucket` on the bucket). A prefix that holds no object, or a
  bucket that does not exist, is bad input (exit 2: nothing would be synced); a listing that fails
  otherwise (denied, unreachable) is a runtime failure (exit 1) that says to give `model_size_gib`.
- a Hugging Face Hub model (`model_id` without `model_source`) is not read: its size depends on which
  files the engine downloads (safetensors or bin, which revision), which only the engine decides.
  Without `model_size_gib` its pod requests no model storage and nothing is refused; the command
  says so on stderr (`hub_note`).

The size is then checked against the GPU nodes where the CLI's environment names them, as
`GCO_MODEL_SOURCES` is: `GCO_GPU_INSTANCE_TYPES` and `GCO_GPU_DISK_GIB`, the reconciler's own
variables (gco.reconcile.environment), which refuses the same size as a terminal status in any case.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from gco import aws
from gco.admission.errors import ModelSizeError
from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.spec import EndpointSpec
from gco.env import GPU_INSTANCE_TYPES_ENV
from gco.reconcile.environment import GPU_DISK_GIB_ENV
from gco.reconcile.node_storage import SIZE_FIELD, shortfall

SOURCE_FIELD = "model_source"
GIB = 2**30
MISSING_BUCKET = "NoSuchBucket"


class SourceSizer(Protocol):
    """Reads how many bytes a `model_source` holds."""

    def size_bytes(self, source: str) -> int: ...


def sync_prefix(source: str) -> tuple[str, str]:
    """The bucket and the key prefix `aws s3 sync <source> <dir>` lists (a directory: ends in `/`)."""
    bucket, _, key = source.removeprefix("s3://").partition("/")
    return bucket, (key if not key or key.endswith("/") else key + "/")


class S3SourceSizer:
    """The S3 adapter: ListObjectsV2 over the sync's prefix, every page, object sizes summed."""

    def __init__(self, client: Any, *, page_size: int | None = None) -> None:
        self.client = client
        # Keys per ListObjectsV2 page (`MaxKeys`); None: S3's own, at most 1,000.
        self.pagination = {"PageSize": page_size} if page_size else {}

    @classmethod
    def connect(cls, endpoint_url: str | None = None) -> S3SourceSizer:
        """An adapter over gco's S3 client (`gco.aws.client`: its retries and timeouts)."""
        return cls(aws.client("s3", endpoint_url=endpoint_url))

    def size_bytes(self, source: str) -> int:
        """The bytes under the source's prefix.

        Raises:
            InvalidSpecError: field `model_source`: the bucket does not exist, or holds nothing under
                the prefix (exit 2).
            ModelSizeError: the listing failed otherwise (exit 1).
        """
        bucket, prefix = sync_prefix(source)
        total = objects = 0
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix, PaginationConfig=self.pagination
            ):
                for item in page.get("Contents") or []:
                    total += int(item["Size"])
                    objects += 1
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            if code == MISSING_BUCKET:
                raise InvalidSpecError(SOURCE_FIELD, f"{source}: bucket {bucket} does not exist") from None
            raise ModelSizeError(_unread(source, f"{code}: {error}")) from error
        except BotoCoreError as error:
            raise ModelSizeError(_unread(source, str(error))) from error
        if objects == 0:
            raise InvalidSpecError(
                SOURCE_FIELD, f"{source}: no object under s3://{bucket}/{prefix}, nothing to sync"
            )
        return total


def _unread(source: str, why: str) -> str:
    return f"{SOURCE_FIELD}: cannot list {source} to size the model ({why}); give {SIZE_FIELD}"


def size_gib(size_bytes: int) -> int:
    """Bytes in whole GiB, rounded up, at least 1 (the spec's unit)."""
    return max(1, math.ceil(size_bytes / GIB))


def read_size(spec: Mapping[str, Any], sizer: SourceSizer) -> int | None:
    """The `model_size_gib` to store for a spec (a mapping of its fields) that gives none: read from
    its `model_source`; None where the spec gives a size, or has no source (a Hub model: `hub_note`).

    Raises:
        InvalidSpecError, ModelSizeError: as the sizer's `size_bytes`.
    """
    source = spec.get(SOURCE_FIELD)
    if spec.get(SIZE_FIELD) is not None or not isinstance(source, str):
        return None
    return size_gib(sizer.size_bytes(source))


def hub_note(spec: EndpointSpec) -> str | None:
    """The stderr line for a Hub model without a size (it is not read, module docstring), or None."""
    if spec.model_size_gib is not None or spec.model_source is not None or spec.model_id is None:
        return None
    return (
        f"warning: {SIZE_FIELD} not given and the Hugging Face Hub is not read: the pod of "
        f"{spec.model_id} requests no model storage and its size is not checked"
    )


@dataclass(frozen=True)
class NodeStorage:
    """The GPU nodes a Region offers: their instance types and root volume (GiB, None: not known)."""

    instance_types: tuple[str, ...]
    root_gib: int | None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> NodeStorage | None:
        """From `GCO_GPU_INSTANCE_TYPES` and `GCO_GPU_DISK_GIB`; None where the types are not set.

        Raises:
            InvalidSpecError: `GCO_GPU_DISK_GIB` is not a positive integer (names the variable).
        """
        types = tuple(
            item.strip() for item in environ.get(GPU_INSTANCE_TYPES_ENV, "").split(",") if item.strip()
        )
        if not types:
            return None
        raw = environ.get(GPU_DISK_GIB_ENV, "").strip()
        if raw and not (raw.isdigit() and int(raw) > 0):
            raise InvalidSpecError(GPU_DISK_GIB_ENV, f"{raw!r} is not a positive number of GiB")
        return cls(types, int(raw) if raw else None)


def check_fit(spec: EndpointSpec, storage: NodeStorage | None, *, read_from: str | None = None) -> None:
    """Refuse a model no GPU node of `storage` could hold (None: not known here, nothing refused).

    Parameters:
        read_from: the source the size was read from, named in the refusal (None: the spec gave it).

    Raises:
        InvalidSpecError: field `model_size_gib`; or an instance type in `GCO_GPU_INSTANCE_TYPES`
            that gco does not know (names the variable).
    """
    if storage is None or spec.model_size_gib is None:
        return
    try:
        reason = shortfall(
            spec.model_size_gib,
            gpus=spec.gpu_count,
            model=spec.gpu_type,
            instance_types=storage.instance_types,
            root_gib=storage.root_gib,
        )
    except ValueError as error:
        raise InvalidSpecError(GPU_INSTANCE_TYPES_ENV, str(error)) from None
    if reason is not None:
        read = f" (read from {read_from})" if read_from else ""
        raise InvalidSpecError(SIZE_FIELD, f"{spec.model_size_gib} GiB{read} {reason}")
