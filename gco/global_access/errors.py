"""Errors of the global way in: bearer keys and their store.

    GlobalAccessError              (gco.errors.GcoError; exit 1)
    ├── BearerFormatError          an Authorization header that is not `Bearer gco-<key_id>-<secret>`
    ├── UnauthorizedError          the global authorizer's 401: its message is exactly "Unauthorized"
    ├── KeyRecordError             a value that is not a key's record (a field and why; also a ValueError)
    └── KeyStoreError              the keys table cannot be read or written (AWS unavailable, no table)
        ├── KeyExistsError         a new key's id is already in the table (nothing was written)
        └── KeyNotFoundError       no key has this id (revoke, get)

A bad argument (a key name, an endpoint name, a key id that is not 12 hex characters) is a
`GcoInputError` (exit 2).
"""

from __future__ import annotations

from gco.errors import GcoError

# The message that makes API Gateway answer a Lambda authorizer's failure with 401 instead of 500.
UNAUTHORIZED = "Unauthorized"


class GlobalAccessError(GcoError):
    """Root of the global way in's errors."""


class BearerFormatError(GlobalAccessError):
    """The Authorization header is missing or not `Bearer gco-<key_id>-<secret>` (401 to a caller)."""


class UnauthorizedError(GlobalAccessError):
    """The caller has no valid key: raised out of the authorizer's Lambda for a 401. Its message is
    exactly "Unauthorized", the one API Gateway's Lambda-authorizer protocol turns into 401
    (`gco.global_access.authorizer`)."""

    def __init__(self) -> None:
        super().__init__(UNAUTHORIZED)


class KeyRecordError(GlobalAccessError, ValueError):
    """A key's record does not hold: `field` names the first bad field, `message` says why. The store
    turns it into a `KeyStoreError` naming the item; `keys.new_key` into a `GcoInputError`."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class KeyStoreError(GlobalAccessError):
    """The keys table cannot be read or written."""


class KeyExistsError(KeyStoreError):
    """A key with this id is already stored: nothing was written."""


class KeyNotFoundError(KeyStoreError):
    """No key has this id."""
