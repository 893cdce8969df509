"""The live validation matrix: vLLM and TGI endpoints deployed, checked, autoscaled and destroyed.

The settings and their rules (`settings`), the engine adapters (`adapters`), the run's identity
(`identity`), the run itself (`run`, `checks`, `destroy`), its checkpoint and evidence, and the
functions `gco matrix` calls (`service`). `docs/matrix.md` describes it.
"""

from gco.validation.errors import (
    CheckpointError,
    IdentityChangedError,
    MatrixError,
    MatrixFailedError,
    SettingsError,
)
from gco.validation.identity import CONTRACT_VERSION, OWNER_LABEL, first_difference, identity
from gco.validation.settings import KEYS, MatrixSettings, Runtime, parse_settings

__all__ = [
    "CONTRACT_VERSION",
    "KEYS",
    "OWNER_LABEL",
    "CheckpointError",
    "IdentityChangedError",
    "MatrixError",
    "MatrixFailedError",
    "MatrixSettings",
    "Runtime",
    "SettingsError",
    "first_difference",
    "identity",
    "parse_settings",
]
