"""The API server's size and name limits, as the stand-in enforces them on every write.

The real API server refuses each of these; without them the stand-in stored objects of any size,
and a route table that Kubernetes would refuse at about 2,000 endpoints went unnoticed. Each limit
cites the source it models:

- a request body over 3 MiB: 413 `Request entity too large: limit is 3145728` (k8s.io/apiserver
  `pkg/server/config.go`: `MaxRequestBodyBytes: int64(3 * 1024 * 1024)`, enforced by
  `handlers/rest.go` `limitedReadBody`);
- a ConfigMap's or Secret's data over 1 MiB (the values of `data` and `binaryData`, summed): 422
  `Too long: must have at most 1048576 bytes` (k8s.io/kubernetes `pkg/apis/core/validation/
  validation.go` `ValidateConfigMap` and `ValidateSecret` against `core.MaxSecretSize = 1 * 1024 *
  1024`; kubernetes.io/docs/concepts/configuration/configmap/: "The data stored in a ConfigMap
  cannot exceed 1 MiB");
- annotations over 256 KiB in total (keys and values): 422 (k8s.io/apimachinery `pkg/api/
  validation/objectmeta.go` `TotalAnnotationSizeLimitB = 256 * (1 << 10)`);
- a name over 253 characters (a DNS-1123 subdomain), or over 63 for kinds named by a DNS label
  (Namespaces, Services): 422 (kubernetes.io/docs/concepts/overview/working-with-objects/names/);
- a label value over 63 characters, or a label key whose name part is over 63 or whose prefix is
  over 253: 422 (apimachinery `pkg/util/validation/validation.go` `IsValidLabelValue`,
  `IsQualifiedName`; kubernetes.io/docs/concepts/overview/working-with-objects/labels/
  #syntax-and-character-set).

It does not model: the characters each of those may hold (only lengths), etcd's own request limit
(1.5 MiB by default, above what these leave), or limits of fields other than these.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from gco.local.standin.status import status
from gco.reconcile.objects import NAMESPACE, SERVICE, Kind

MAX_REQUEST_BODY = 3 * 1024 * 1024
MAX_DATA = 1024 * 1024
MAX_ANNOTATIONS = 256 * 1024
MAX_NAME = 253
MAX_LABEL = 63
DATA_KINDS = frozenset({"ConfigMap", "Secret"})
LABEL_NAMED = frozenset({NAMESPACE.kind, SERVICE.kind})


def body_refusal(length: int) -> tuple[int, dict[str, Any]] | None:
    """413 for a request body over the API server's limit, or None."""
    if length <= MAX_REQUEST_BODY:
        return None
    return 413, status(413, f"Request entity too large: limit is {MAX_REQUEST_BODY}")


def object_refusal(kind: Kind, obj: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """422 Invalid naming the first field over its limit, or None."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    problem = _name_problem(kind, name) or _labels_problem(meta) or _annotations_problem(meta)
    if problem is None and kind.kind in DATA_KINDS:
        problem = _data_problem(obj)
    if problem is None:
        return None
    return 422, status(422, f'{kind.kind} "{name}" is invalid: {problem}')


def _too_long(field: str, limit: int, unit: str = "bytes") -> str:
    return f"{field}: Too long: must have at most {limit} {unit}"


def _name_problem(kind: Kind, name: str) -> str | None:
    limit = MAX_LABEL if kind.kind in LABEL_NAMED else MAX_NAME
    return _too_long("metadata.name", limit, "characters") if len(name) > limit else None


def _labels_problem(meta: Mapping[str, Any]) -> str | None:
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, local = str(key).rpartition("/")
        if len(local) > MAX_LABEL:
            return f"metadata.labels: Invalid value: {key!r}: name part must be no more than 63 characters"
        if len(prefix) > MAX_NAME:
            return f"metadata.labels: Invalid value: {key!r}: prefix part must be no more than 253 characters"
        if len(str(value)) > MAX_LABEL:
            return _too_long(f"metadata.labels[{key}]", MAX_LABEL, "characters")
    return None


def _annotations_problem(meta: Mapping[str, Any]) -> str | None:
    annotations = meta.get("annotations") or {}
    total = sum(len(str(key)) + len(str(value)) for key, value in annotations.items())
    return _too_long("metadata.annotations", MAX_ANNOTATIONS) if total > MAX_ANNOTATIONS else None


def _data_problem(obj: Mapping[str, Any]) -> str | None:
    """Bytes of the values: a ConfigMap's `data` as UTF-8, base64 fields (`binaryData`, a Secret's
    `data`) decoded, as the API server holds them."""
    encoded = ("binaryData", "data") if obj.get("kind") == "Secret" else ("binaryData",)
    total = 0
    for field in ("data", "binaryData"):
        for value in (obj.get(field) or {}).values():
            text = str(value)
            total += len(base64.b64decode(text)) if field in encoded else len(text.encode())
    return _too_long("[]", MAX_DATA) if total > MAX_DATA else None
