"""How the stand-in API server stores a Secret, as the real one does.

Modelled (kubernetes.io/docs/concepts/configuration/secret/ and the core API's validation,
k8s.io/kubernetes `pkg/apis/core/validation/validation.go` `ValidateSecret`):

- `data` values are base64 (the API server decodes each; a value that is not base64 is 422 Invalid);
- `stringData` is write-only: each entry is base64-encoded into `data` (overriding the same key of
  `data`) and `stringData` itself is never stored or answered;
- each key is `[-._a-zA-Z0-9]+` (`IsConfigMapKey`), else 422.

Not modelled: the 1 MiB size limit, immutable Secrets, type-specific checks (only `Opaque` is used),
encryption at rest (EKS encrypts Secrets with a KMS key; the stand-in keeps them in memory).
Authorization is the server's, as for every kind (`gco.reconcile.access`: by name only).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def stored_secret(config: dict[str, Any]) -> dict[str, Any] | str:
    """The Secret as stored (`stringData` folded into `data`), or why it is invalid (a 422 message)."""
    data = dict(config.get("data") or {})
    for key, value in (config.pop("stringData", None) or {}).items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    for key, value in data.items():
        if not _KEY.fullmatch(str(key)):
            return f"Secret data[{key}]: Invalid value: a valid config key must consist of alphanumeric " + (
                'characters, "-", "_" or "."'
            )
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            return f"Secret data[{key}]: Invalid value: not base64"
    if data:
        config["data"] = data
    return config
