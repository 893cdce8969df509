"""Building the Regional reconciler from the Lambda's environment (the only place env is read).

EKS_CLUSTER_NAME                  the Region's EKS cluster (required)
RECONCILER_REGION | AWS_REGION    the Region this reconciler serves (required)
INFERENCE_ENDPOINTS_TABLE_NAME    the endpoint table (default gco-inference-endpoints)
DYNAMODB_REGION                   the table's home Region, where every read and write goes
RECONCILE_WAIT_SECONDS            how long a direct reconcile call may wait for readiness (default 10;
                                  the stream handler and the sweep never wait: docs/scale.md)
GCO_PROXY_SETTINGS                the shared proxy's settings as JSON (`ProxySettings`; default: its defaults)
GCO_CLUSTER_ADDONS                the add-ons the Region's cluster has (gco.addons; unset: not known)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from pydantic import ValidationError

from gco.addons import addons_from_env
from gco.endpoints.errors import InvalidSpecError
from gco.reconcile.proxy_settings import DEFAULT_PROXY, PROXY_SETTINGS_ENV, ProxySettings
from gco.reconcile.reconciler import Reconciler
from gco.reconcile.settings import RenderSettings


def _required(env: Mapping[str, str], *names: str) -> str:
    for name in names:
        if env.get(name):
            return env[name]
    raise InvalidSpecError(names[0], "is not set in the environment")


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InvalidSpecError(name, f"{raw!r} is not a number of seconds") from None
    if not 0 <= value <= 600:
        raise InvalidSpecError(name, "must be from 0 to 600 seconds")
    return value


def _proxy(env: Mapping[str, str]) -> ProxySettings:
    raw = env.get(PROXY_SETTINGS_ENV)
    if not raw:
        return DEFAULT_PROXY
    try:
        return ProxySettings.model_validate_json(raw)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "value"
        raise InvalidSpecError(PROXY_SETTINGS_ENV, f"{where}: {first['msg']}") from None


def reconciler_from_env(env: Mapping[str, str] | None = None) -> Reconciler:
    """The Region's reconciler: home-table store and IAM-authenticated EKS client.

    Raises:
        InvalidSpecError: a required variable is missing or a value is malformed (names it).
        ClusterConfigError: the EKS cluster cannot be described.
    """
    from gco.endpoints.store import EndpointStore
    from gco.reconcile.eks import connect_eks

    source = os.environ if env is None else env
    cluster_name = _required(source, "EKS_CLUSTER_NAME")
    region = _required(source, "RECONCILER_REGION", "AWS_REGION")
    wait = _seconds(source, "RECONCILE_WAIT_SECONDS", 10.0)
    settings = RenderSettings(proxy=_proxy(source), addons=addons_from_env(source))
    store = EndpointStore.connect(table_name=source.get("INFERENCE_ENDPOINTS_TABLE_NAME") or None)
    return Reconciler(store, connect_eks(cluster_name, region), region, settings=settings, wait=wait)


class LazyReconciler:
    """The execution environment's one reconciler, built on first use rather than at cold start."""

    def __init__(self, build: Callable[[], Reconciler] = reconciler_from_env) -> None:
        self._build = build
        self._built: Reconciler | None = None

    def __call__(self) -> Reconciler:
        if self._built is None:
            self._built = self._build()
        return self._built
