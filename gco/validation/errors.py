"""Errors of the live validation matrix.

    MatrixError                    (gco.errors.GcoError; exit 1)
    ├── SettingsError              a settings value breaks a rule (also GcoInputError: exit 2)
    ├── IdentityChangedError       resume refused: the settings' identity differs (exit 2)
    ├── CheckpointError            the run directory holds no readable checkpoint (exit 2)
    ├── MatrixFailedError          the run ended with a failed step (exit 1; the evidence is written)
    ├── UnreachableError           a Region's cluster or way in cannot be found (`connect.py`)
    └── MirrorError                a run's file could not be copied to its mirror (`mirror.py`)

Store, cluster and HTTP errors are caught at the step that met them and recorded as that step's
failure, so one failing endpoint never stops the destruction of the others.
"""

from __future__ import annotations

from gco.errors import GcoError, GcoInputError


class MatrixError(GcoError):
    """Root of the matrix package's errors."""


class SettingsError(MatrixError, GcoInputError):
    """A settings value breaks a rule; `field` is its path (`inference_runtimes[0].image`)."""

    def __init__(self, field: str, message: str) -> None:
        GcoInputError.__init__(self, field, message)


class IdentityChangedError(MatrixError, GcoInputError):
    """A resumed run's identity differs from the checkpoint's at `field` (the first difference)."""

    def __init__(self, field: str, message: str) -> None:
        GcoInputError.__init__(self, field, message)


class CheckpointError(MatrixError, GcoInputError):
    """The run directory's checkpoint is missing or unreadable."""

    def __init__(self, field: str, message: str) -> None:
        GcoInputError.__init__(self, field, message)


class MatrixFailedError(MatrixError):
    """The run finished with a failed step; the message is the verdict line."""


class UnreachableError(MatrixError):
    """A Region's cluster or way in cannot be found."""
