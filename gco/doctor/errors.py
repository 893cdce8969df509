"""The doctor's exceptions.

    GcoError
    └── DoctorError                a check could not be made
        ├── NoCredentialsError     no AWS credentials: only the offline checks can run
        ├── AccountReadError       an AWS read was refused or failed (names the call and the code)
        └── ChecksFailedError      the report has failed checks (the CLI's exit status 1)

A failed read is not a crash: the check it belonged to reports it as a failure with its fix (the
permission to grant, the credentials to configure).
"""

from __future__ import annotations

from gco.errors import GcoError


class DoctorError(GcoError):
    """Root of the doctor's errors."""


class NoCredentialsError(DoctorError):
    """boto3 found no credentials."""


class AccountReadError(DoctorError):
    """An AWS call failed; `code` is the service's error code (`AccessDeniedException`, ...)."""

    def __init__(self, call: str, code: str, message: str) -> None:
        self.call, self.code = call, code
        super().__init__(f"{call}: {code}: {message}")


class ChecksFailedError(DoctorError):
    """At least one check failed; the message names them."""
