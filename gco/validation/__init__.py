"""The live validation matrix: vLLM and TGI endpoints deployed, checked, autoscaled and destroyed.

The settings and their rules (`settings`), the engine adapters (`adapters`, over each framework's
matrix adapter in `frameworks`), the run's identity
(`identity`), the run itself (`run`, `checks`, `destroy`), its checkpoint and evidence, and the
functions `gco matrix` calls (`service`). `docs/matrix.md` describes it.
"""

from gco.reconcile.expiry import DEADLINE_LABEL, OWNER_LABEL
from gco.validation.errors import (
    CheckpointError,
    IdentityChangedError,
    MatrixError,
    MatrixFailedError,
    SettingsError,
)
from gco.validation.identity import CONTRACT_VERSION, first_difference, identity
from gco.validation.settings import KEYS, MatrixSettings, Runtime, parse_settings

__all__ = [
    "CONTRACT_VERSION",
    "DEADLINE_LABEL",
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
