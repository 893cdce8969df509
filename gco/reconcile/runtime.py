"""Building the Regional reconciler from the Lambda's environment (the only place env is read).

The variables and their meaning: `gco.reconcile.environment.ReconcilerEnvironment`, the model the
Regional stack writes them from.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Imported where they are used: a handler's cold import (`lambdas/`) builds no pydantic model and
    # loads no botocore until its first invocation needs the reconciler (docs/benchmarks.md); the
    # stream function never writes a heartbeat, so it never imports that module.
    from gco.reconcile.heartbeat import HeartbeatWriter
    from gco.reconcile.reconciler import Reconciler


def reconciler_from_env(env: Mapping[str, str] | None = None) -> Reconciler:
    """The Region's reconciler: home-table store and IAM-authenticated EKS client.

    Raises:
        InvalidSpecError: a required variable is missing or a value is malformed (names it).
        ClusterConfigError: the EKS cluster cannot be described.
    """
    from gco import aws
    from gco.endpoints.store import EndpointStore
    from gco.reconcile.eks import connect_eks
    from gco.reconcile.environment import ReconcilerEnvironment
    from gco.reconcile.model_sources import parse_prefixes
    from gco.reconcile.proxy.proxy_probe import PodProxyProbe
    from gco.reconcile.reconciler import Reconciler
    from gco.reconcile.settings import RenderSettings
    from gco.secrets.secrets_manager import SecretsManagerReader

    settings = ReconcilerEnvironment.from_env(os.environ if env is None else env)
    store = EndpointStore(aws.client("dynamodb", region=settings.home_region), settings.table_name)
    # Secrets named without an ARN live in the home Region, as the table does (gco.secrets.endpoint_secrets).
    home = settings.home_region or aws.home_region()
    secrets = SecretsManagerReader(lambda region: aws.client("secretsmanager", region=region), home)
    cluster = connect_eks(settings.cluster_name, settings.region)
    return Reconciler(
        store,
        cluster,
        settings.region,
        settings=RenderSettings(
            proxy=settings.proxy,
            addons=settings.addons,
            gpu_instance_types=settings.gpu_instance_types,
            model_sources=None if settings.model_sources is None else parse_prefixes(settings.model_sources),
            endpoint_secrets=settings.endpoint_secrets,
            load_balancer_cidrs=settings.load_balancer_cidrs,
            control_plane_cidrs=settings.control_plane_cidrs,
            gpu_root_gib=settings.gpu_disk_gib,
        ),
        secrets=secrets,
        probe=PodProxyProbe(cluster),
        wait=settings.wait_seconds,
    )


def heartbeat_from_env(env: Mapping[str, str] | None = None) -> HeartbeatWriter:
    """The sweep's heartbeat: the parameter of this table in the reconciler's own Region.

    Raises:
        InvalidSpecError: a required variable is missing or a value is malformed (names it).
    """
    from gco import aws
    from gco.reconcile.environment import ReconcilerEnvironment
    from gco.reconcile.heartbeat import HeartbeatWriter, SsmParameters

    settings = ReconcilerEnvironment.from_env(os.environ if env is None else env)
    ssm = SsmParameters(aws.client("ssm", region=settings.region))
    return HeartbeatWriter(ssm, settings.table_name, settings.sweep_seconds)


class LazyReconciler:
    """The execution environment's one reconciler, built on first use rather than at cold start."""

    def __init__(self, build: Callable[[], Reconciler] = reconciler_from_env) -> None:
        self._build = build
        self._built: Reconciler | None = None

    def __call__(self) -> Reconciler:
        if self._built is None:
            self._built = self._build()
        return self._built
