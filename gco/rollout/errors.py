"""Errors of the rollout package.

RolloutError                 (gco.errors.GcoError)
├── RolloutInputError        a bad option or state document (also GcoInputError: exit 2)
├── RolloutSupersededError   the endpoint was deleted or re-created since the rollout began (nothing written)
├── ExecutionStartError      Step Functions refused to start the rollout's execution, or was unreachable
└── RolloutNotPromotedError  the rollout ended rolled back or inconclusive (the CLI's exit 1)

In the library a verdict (promoted, rolled back, inconclusive), and a canary that never served (rolled
back), is never an exception: it is the rollout's outcome, written to its evidence; the CLI raises
RolloutNotPromotedError (exit 1) for any outcome but promoted.
"""

from __future__ import annotations

from gco.errors import GcoError, GcoInputError


class RolloutError(GcoError):
    """Root of the rollout package's errors."""


class RolloutInputError(RolloutError, GcoInputError):
    """An option or a state document holds a bad value; `field` names it."""

    exit_code = 2

    def __init__(self, field: str, message: str) -> None:
        GcoInputError.__init__(self, field, message)


class RolloutSupersededError(RolloutError):
    """The endpoint is no longer the lifecycle the rollout began on."""


class ExecutionStartError(RolloutError):
    """Step Functions refused or could not be reached."""


class RolloutNotPromotedError(RolloutError):
    """The rollout ended other than promoted."""
