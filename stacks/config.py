"""The deployment configuration model, as the stacks import it (its home is `gco.deployment.config`,
which `gco doctor` reads too; the model imports no CDK)."""

from gco.deployment.config import (
    DEPLOYMENT_TAG,
    ECR_IMAGE,
    AlarmsConfig,
    ConfigError,
    GcoConfig,
    NetworkConfig,
    NodeGroupConfig,
    OperatorsConfig,
    RunnerConfig,
    parse_config,
    with_overrides,
)
from gco.deployment.global_address import GlobalAddressConfig

__all__ = [
    "DEPLOYMENT_TAG",
    "ECR_IMAGE",
    "AlarmsConfig",
    "ConfigError",
    "GcoConfig",
    "GlobalAddressConfig",
    "NetworkConfig",
    "NodeGroupConfig",
    "OperatorsConfig",
    "RunnerConfig",
    "parse_config",
    "with_overrides",
]
