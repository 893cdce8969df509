"""Where endpoint pods may read models from: the S3 prefixes named in `cdk.json`, defined once.

The Regional stack gives every endpoint pod an AWS identity through EKS Pod Identity: the service
account `MODEL_SERVICE_ACCOUNT` in each endpoint namespace is associated with a role that may only
list and read objects under these prefixes (and decrypt with the KMS keys named beside them), so a
`model_source` init container (`aws s3 sync`) can fetch a model and nothing else. A spec whose
`model_source` lies outside every prefix is refused, naming the prefixes (`check_model_source`):
by `gco inference deploy|update` where `GCO_MODEL_SOURCES` is set (the Regional stack's
`ModelSources` output), and always by the reconciler, which the stack tells them
(`ReconcilerEnvironment.model_sources`).

A prefix is `s3://bucket/` (the whole bucket) or `s3://bucket/some/path/`, ending in `/`, so
`s3://models/llama/` allows `s3://models/llama/8b` and not `s3://models/llama-secret/`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gco.endpoints.errors import InvalidSpecError

MODEL_SERVICE_ACCOUNT = "gco-model-reader"
MODEL_SOURCES_ENV = "GCO_MODEL_SOURCES"  # comma-separated prefixes
NO_SOURCES = "none"  # the stack output's value when no prefix is configured (an output cannot be empty)
# S3 bucket names (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html), then a key
# prefix that is empty or ends in "/".
_PREFIX = re.compile(r"s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>(?:[^/]+/)*)")


@dataclass(frozen=True)
class S3Prefix:
    """A bucket and a key prefix (empty: the whole bucket; else ending in `/`)."""

    bucket: str
    key: str

    @classmethod
    def parse(cls, uri: str) -> S3Prefix:
        """`s3://bucket/path/` as an `S3Prefix`.

        Raises:
            ValueError: not `s3://<bucket>/` with an optional key prefix ending in `/`.
        """
        match = _PREFIX.fullmatch(uri)
        if match is None:
            raise ValueError(f"{uri!r} is not an s3://bucket/ or s3://bucket/prefix/ URI (ending in /)")
        return cls(match["bucket"], match["key"])

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def holds(self, source: str) -> bool:
        """Whether the `s3://` URI `source` lies under this prefix."""
        bucket, _, key = source.removeprefix("s3://").partition("/")
        return bucket == self.bucket and key.startswith(self.key)


def parse_prefixes(uris: Iterable[str]) -> tuple[S3Prefix, ...]:
    """Each URI parsed (first-seen order, no duplicates)."""
    return tuple(dict.fromkeys(S3Prefix.parse(uri) for uri in uris))


def prefixes_from_env(env: Mapping[str, str]) -> tuple[S3Prefix, ...] | None:
    """`GCO_MODEL_SOURCES` parsed; None where it is unset (not known here), () for `none` or empty.

    Raises:
        InvalidSpecError: a listed prefix is malformed (names the variable).
    """
    raw = env.get(MODEL_SOURCES_ENV)
    if raw is None:
        return None
    if raw.strip() == NO_SOURCES:
        return ()
    try:
        return parse_prefixes(item.strip() for item in raw.split(",") if item.strip())
    except ValueError as error:
        raise InvalidSpecError(MODEL_SOURCES_ENV, str(error)) from None


def refusal(source: str | None, prefixes: Iterable[S3Prefix] | None) -> str | None:
    """Why `source` may not be read by endpoint pods, or None (no source, allowed, or not known)."""
    if source is None or prefixes is None:
        return None
    allowed = tuple(prefixes)
    if any(prefix.holds(source) for prefix in allowed):
        return None
    if not allowed:
        return f"{source} cannot be read: no model sources are configured (cdk.json gco.model_sources)"
    names = ", ".join(prefix.uri for prefix in allowed)
    return f"{source} is outside the model sources endpoint pods may read ({names})"


def check_model_source(source: str | None, prefixes: Iterable[S3Prefix] | None) -> None:
    """Refuse a `model_source` outside `prefixes` (None: not known here, nothing refused).

    Raises:
        InvalidSpecError: field `model_source`, naming the allowed prefixes.
    """
    reason = refusal(source, prefixes)
    if reason is not None:
        raise InvalidSpecError("model_source", reason)
