"""Errors of the endpoint store and models.

    EndpointError                 (gco.errors.GcoError)
    ├── EndpointNotFoundError     no record with that name
    ├── EndpointExistsError       create refused: the name is taken
    ├── InvalidSpecError          bad field value (also GcoInputError: exit 2)
    ├── InvalidTransitionError    the record's current state forbids the operation
    ├── NoCanaryError             promote or roll back an endpoint that has no canary
    ├── LostRaceError             a fenced write lost to a concurrent writer
    ├── MalformedRecordError      a stored item does not parse as a record (names its key and field)
    ├── StoreUnavailableError     DynamoDB failed after retries
    └── TableMismatchError        the table exists but is not shaped as gco needs (key or stream)

botocore errors are converted at the store boundary with `raise ... from`; a stored item that fails
the record model (pydantic's `ValidationError`) becomes `MalformedRecordError` where it is parsed.
"""

from __future__ import annotations

from gco.errors import GcoError, GcoInputError


class EndpointError(GcoError):
    """Root of the endpoint package's errors."""


class EndpointNotFoundError(EndpointError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"endpoint {name!r} not found")


class EndpointExistsError(EndpointError):
    def __init__(self, name: str, desired_state: str | None = None) -> None:
        self.name = name
        self.desired_state = desired_state
        detail = f" (desired_state {desired_state}; wait for its purge)" if desired_state == "deleted" else ""
        super().__init__(f"endpoint {name!r} already exists{detail}")


class InvalidSpecError(EndpointError, GcoInputError):
    """A field holds a bad value; `field` is its dotted path."""

    exit_code = 2

    def __init__(self, field: str, message: str) -> None:
        GcoInputError.__init__(self, field, message)


class InvalidTransitionError(EndpointError):
    """The operation does not apply to the record's current state, which is named."""

    def __init__(self, name: str, operation: str, current_state: str, hint: str = "") -> None:
        self.name = name
        self.operation = operation
        self.current_state = current_state
        message = f"cannot {operation} endpoint {name!r}: its desired_state is {current_state}"
        super().__init__(f"{message}; {hint}" if hint else message)


class NoCanaryError(EndpointError):
    """Promote or rollback of an endpoint whose spec has no canary."""

    def __init__(self, name: str, operation: str) -> None:
        self.name = name
        super().__init__(f"cannot {operation} endpoint {name!r}: it has no canary")


class LostRaceError(EndpointError):
    """A concurrent writer changed the record between our read and our fenced write."""

    def __init__(self, name: str, operation: str, fence: str | None = None) -> None:
        self.name = name
        self.operation = operation
        self.fence = fence
        if fence:
            super().__init__(f"{operation} of endpoint {name!r} refused: {fence}")
        else:
            super().__init__(
                f"{operation} of endpoint {name!r} lost a race with a concurrent change; re-read and retry"
            )


class MalformedRecordError(EndpointError):
    """A stored item is not a readable record: an attribute missing, of the wrong type, or a value
    (a state) no gco knows. A runtime failure (exit 1), not bad input: the caller asked for a key,
    the table holds something gco cannot read under it.

    Attributes:
        key: the item's `endpoint_name` (the table's key), as stored.
        field: the dotted path of the first field that failed, e.g. `spec.port` or `desired_state`.
        problem: what is wrong with it.
    """

    def __init__(self, key: str, field: str, problem: str) -> None:
        self.key = key
        self.field = field
        self.problem = problem
        super().__init__(f"endpoint record {key!r} is unreadable: {field}: {problem}")


class StoreUnavailableError(EndpointError):
    """DynamoDB could not be reached or kept failing after retries."""


class TableMismatchError(EndpointError):
    """The table exists but is not shaped as gco needs (key or stream)."""
