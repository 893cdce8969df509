"""Bearer keys: how one is made, how it is stored (hashed), and how a request's key is checked.

A key is `gco-<key_id>-<secret>`: `key_id` is 12 lowercase hex characters (6 random bytes), the
record's partition key, which lets a check read one item; `secret` is 32 random bytes from the OS
CSPRNG (`secrets`) as unpadded base64url (43 characters). Only the SHA-256 of the whole key is
stored (`key_hash`), so the table, its backups and its replicas hold nothing a caller could send;
the plaintext is shown once, when the key is made. 256 random bits need no slow password hash: a
slow hash defends guessable secrets, and these cannot be guessed (NIST SP 800-63B 5.1.1.2 asks a
memorized-secret verifier for one; a random 256-bit look-up secret is not memorized).

`verify` compares hashes with `hmac.compare_digest`, whose time does not depend on where two values
differ (docs.python.org/3/library/hmac.html#hmac.compare_digest), and says why a key is refused:
unknown, wrong secret, revoked, or not scoped to the endpoint. Pure: no I/O, the clock injected.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any, Literal

from gco.endpoints import names
from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.tokens import format_timestamp
from gco.errors import GcoInputError
from gco.global_access.errors import BearerFormatError, KeyRecordError

KEY_PREFIX = "gco-"
KEY_ID_BYTES = 6
SECRET_BYTES = 32
KEY_ID = re.compile(r"[0-9a-f]{12}")
KEY_HASH = re.compile(r"[0-9a-f]{64}")
# `secrets.token_urlsafe(32)`: 32 bytes base64url without padding is 43 characters.
KEY = re.compile(r"gco-(?P<key_id>[0-9a-f]{12})-(?P<secret>[A-Za-z0-9_-]{43})")
ALL_ENDPOINTS = "*"
# RFC 6750 section 2.1: `"Bearer" 1*SP b64token`; the scheme is case-insensitive (RFC 9110 11.1).
BEARER = "bearer"
MAX_KEY_NAME = 128
MAX_SCOPED_ENDPOINTS = 64

Refusal = Literal["unknown", "mismatch", "revoked", "out_of_scope"]
REASONS: dict[str, str] = {
    "unknown": "the key is not known",
    "mismatch": "the key is not known",  # the same words: a caller learns nothing of which ids exist
    "revoked": "the key was revoked",
    "out_of_scope": "the key is not allowed to call this endpoint",
}


@dataclass(frozen=True, kw_only=True)
class ApiKey:
    """A key's stored record: never the key itself, only its SHA-256.

    A plain dataclass checked when made (`__post_init__`), not a pydantic model: the global front
    door's authorizer reads one on every request, and pydantic's import was most of that function's
    cold start (docs/benchmarks.md, "Lambda cold start"). `parse` reads a stored item's values.

    Raises (on construction):
        KeyRecordError: a field is missing its form (naming the field).
    """

    key_id: str
    key_hash: str
    name: str
    endpoints: list[str]
    created_at: str
    created_by: str | None = None
    revoked_at: str | None = None

    def __post_init__(self) -> None:
        _pattern(self.key_id, KEY_ID, "key_id", "12 lowercase hex characters")
        _pattern(self.key_hash, KEY_HASH, "key_hash", "64 lowercase hex characters (a SHA-256)")
        if not isinstance(self.name, str) or not 1 <= len(self.name) <= MAX_KEY_NAME:
            raise KeyRecordError("name", f"must be a string of 1 to {MAX_KEY_NAME} characters")
        _scope(self.endpoints)
        _text(self.created_at, "created_at", optional=False)
        _text(self.created_by, "created_by", optional=True)
        _text(self.revoked_at, "revoked_at", optional=True)

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> ApiKey:
        """The record stored `values` hold (a stored item's plain values).

        Raises:
            KeyRecordError: a field unknown, missing or malformed (naming the first one).
        """
        known = {item.name for item in fields(cls)}
        unknown = sorted(str(name) for name in values if name not in known)
        if unknown:
            raise KeyRecordError(unknown[0], "is not a field of a key's record")
        for required in ("key_id", "key_hash", "name", "endpoints", "created_at"):
            if required not in values:
                raise KeyRecordError(required, "is missing")
        return cls(**values)

    def to_dict(self, *, exclude_none: bool = False) -> dict[str, Any]:
        """The record's fields as plain values (the stored item's, the CLI's JSON)."""
        data = asdict(self)
        return {name: value for name, value in data.items() if value is not None} if exclude_none else data

    def allows(self, endpoint: str) -> bool:
        """Whether the key's scope covers `endpoint`."""
        return self.endpoints == [ALL_ENDPOINTS] or endpoint in self.endpoints


def _pattern(value: Any, pattern: re.Pattern[str], name: str, form: str) -> None:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise KeyRecordError(name, f"must be {form}")


def _text(value: Any, name: str, *, optional: bool) -> None:
    if not isinstance(value, str) and not (optional and value is None):
        raise KeyRecordError(name, "must be a string" + (" or absent" if optional else ""))


def _scope(endpoints: Any) -> None:
    """The endpoints a key may call: 1-64 endpoint names, or `["*"]` alone (all endpoints)."""
    if not isinstance(endpoints, list) or not all(isinstance(name, str) for name in endpoints):
        raise KeyRecordError("endpoints", "must be a list of endpoint names")
    if not 1 <= len(endpoints) <= MAX_SCOPED_ENDPOINTS:
        raise KeyRecordError(
            "endpoints", f"must hold 1 to {MAX_SCOPED_ENDPOINTS} names (got {len(endpoints)})"
        )
    if ALL_ENDPOINTS in endpoints and endpoints != [ALL_ENDPOINTS]:
        raise KeyRecordError(
            "endpoints", f"{ALL_ENDPOINTS!r} (all endpoints) cannot be listed with endpoint names"
        )
    for index, name in enumerate(endpoints):
        if name != ALL_ENDPOINTS:
            try:
                names.endpoint_name(name, f"endpoints[{index}]")
            except InvalidSpecError as error:
                raise KeyRecordError(error.field, error.message) from None


@dataclass(frozen=True)
class Verdict:
    """Whether a request's key may call an endpoint, and if not, why."""

    allowed: bool
    key_id: str | None = None
    refusal: Refusal | None = None

    @property
    def reason(self) -> str:
        """The refusal in words, for the caller's 401/403 answer ("" when allowed)."""
        return REASONS[self.refusal] if self.refusal is not None else ""

    @property
    def status(self) -> int:
        """The HTTP status a refusal answers: 403 for a valid key out of its scope, 401 otherwise."""
        if self.allowed:
            return 200
        return 403 if self.refusal == "out_of_scope" else 401


def key_hash(key: str) -> str:
    """The SHA-256 of the whole key, as lowercase hex: what the table stores."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def check_key_name(value: str, field: str = "name") -> str:
    """A key's name: printable text, 1-128 characters.

    Raises:
        GcoInputError: empty, too long, or holding a control character.
    """
    return names.text(value, field, max_length=MAX_KEY_NAME, allow_empty=False)


def check_key_id(value: str, field: str = "key_id") -> str:
    """`value` as a key id (12 lowercase hex characters).

    Raises:
        GcoInputError: it is not one.
    """
    if not isinstance(value, str) or not KEY_ID.fullmatch(value):
        shown = repr(value[:40]) if isinstance(value, str) else type(value).__name__
        raise GcoInputError(field, f"{shown} is not a key id (12 lowercase hex characters)")
    return value


def check_scope(endpoints: list[str], all_endpoints: bool, field: str = "--endpoint") -> list[str]:
    """The endpoints a new key may call: the names given, or `["*"]` for all.

    Raises:
        GcoInputError: neither or both given, a name is not an endpoint name, or too many names.
    """
    if all_endpoints and endpoints:
        raise GcoInputError(field, "give endpoint names or --all-endpoints, not both")
    if all_endpoints:
        return [ALL_ENDPOINTS]
    if not endpoints:
        raise GcoInputError(field, "name at least one endpoint the key may call, or --all-endpoints")
    if len(endpoints) > MAX_SCOPED_ENDPOINTS:
        raise GcoInputError(field, f"at most {MAX_SCOPED_ENDPOINTS} endpoints (got {len(endpoints)})")
    try:
        return list(dict.fromkeys(names.endpoint_name(name, field) for name in endpoints))
    except InvalidSpecError as error:
        raise GcoInputError(error.field, error.message) from None


def new_key(
    name: str,
    endpoints: list[str],
    *,
    now: datetime,
    created_by: str | None = None,
) -> tuple[str, ApiKey]:
    """A new key: (the plaintext, shown once; its record, which holds only the key's hash).

    Parameters:
        name: what the operator calls the key (printable, 1-128 characters).
        endpoints: the endpoint names the key may call, or `["*"]` for all (see `check_scope`).
        now: the creation time (injected clock).
        created_by: who made it (the caller's identity), stored as given.

    Raises:
        GcoInputError: the name or an endpoint name is invalid.
    """
    name = check_key_name(name)
    key_id = secrets.token_hex(KEY_ID_BYTES)
    plaintext = f"{KEY_PREFIX}{key_id}-{secrets.token_urlsafe(SECRET_BYTES)}"
    try:
        record = ApiKey(
            key_id=key_id,
            key_hash=key_hash(plaintext),
            name=name,
            endpoints=endpoints,
            created_at=format_timestamp(now),
            created_by=created_by,
        )
    except KeyRecordError as error:
        raise GcoInputError(error.field, error.message) from None
    return plaintext, record


def parse_bearer(header: str | None) -> tuple[str, str]:
    """(key_id, key) from an `Authorization` header `Bearer gco-<key_id>-<secret>`.

    Raises:
        BearerFormatError: no header, another scheme, or a token that is not a gco key (the message
            never repeats the token).
    """
    if not header:
        raise BearerFormatError("no Authorization header: send `Authorization: Bearer <key>`")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != BEARER:
        raise BearerFormatError("the Authorization scheme is not Bearer")
    match = KEY.fullmatch(token.strip())
    if match is None:
        raise BearerFormatError("the bearer token is not a gco key (gco-<key id>-<secret>)")
    return match["key_id"], match.group(0)


def verify(key: str, record: ApiKey | None, endpoint: str, now: datetime) -> Verdict:
    """Whether `key` (the plaintext a caller sent) may call `endpoint` at `now`.

    `record` is the stored record of the key's id (None: no such key). The hash is compared in
    constant time even when the record is missing (against a hash of nothing), so the answer's time
    does not say whether an id exists. A key revoked at or before `now` is refused.
    """
    stored = record.key_hash if record is not None else key_hash("")
    matches = hmac.compare_digest(key_hash(key), stored)
    key_id = record.key_id if record is not None else None
    if record is None:
        return Verdict(allowed=False, refusal="unknown")
    if not matches:
        return Verdict(allowed=False, key_id=key_id, refusal="mismatch")
    if record.revoked_at is not None and record.revoked_at <= format_timestamp(now):
        return Verdict(allowed=False, key_id=key_id, refusal="revoked")
    if not record.allows(endpoint):
        return Verdict(allowed=False, key_id=key_id, refusal="out_of_scope")
    return Verdict(allowed=True, key_id=key_id)
