"""The root of every gco exception, and the exit status each kind maps to.

Each package has its own root below `GcoError` (for example `gco.endpoints.EndpointError`);
the CLI only needs `exit_code`: 2 for bad input, 1 for a runtime failure.
"""

from __future__ import annotations


class GcoError(Exception):
    """Base of all gco errors; `exit_code` is what the CLI exits with."""

    exit_code: int = 1


class GcoInputError(GcoError):
    """Bad input from a user or a caller: nothing was changed."""

    exit_code = 2

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)
