"""The reconciler Lambdas' environment: one model, written by the Regional stack and read by the runtime.

EKS_CLUSTER_NAME                  the Region's EKS cluster (required)
RECONCILER_REGION | AWS_REGION    the Region this reconciler serves (required)
INFERENCE_ENDPOINTS_TABLE_NAME    the endpoint table (default gco-inference-endpoints)
DYNAMODB_REGION                   the table's home Region, where every read and write goes
RECONCILE_WAIT_SECONDS            how long a direct reconcile call may wait for readiness (0-600,
                                  default 10; the stream handler and the sweep never wait: docs/scale.md)
GCO_SWEEP_SECONDS                 how often the scheduled sweep runs (default 300; written into the
                                  reconciler's heartbeat: gco.reconcile.heartbeat)
GCO_PROXY_SETTINGS                the shared proxy's settings as JSON (`ProxySettings`; default: its defaults)
GCO_CLUSTER_ADDONS                the add-ons the Region's cluster has (gco.reconcile.addons; unset: unknown)
GCO_MODEL_SOURCES                 the S3 prefixes endpoint pods may read models from, comma-separated
                                  (gco.reconcile.model_sources; unset: not known, nothing refused here)
GCO_ENDPOINT_SECRETS              the Secrets Manager secrets endpoints may name in secret_env (names,
                                  prefix/*, ARNs), comma-separated (gco.secrets.endpoint_secrets; unset: not
                                  known, nothing refused here; empty: none may be named)
GCO_GPU_INSTANCE_TYPES            the GPU node groups' instance types, comma-separated (unset: none
                                  known, and GPU pods request no CPU or memory of their own)
GCO_GPU_DISK_GIB                  the GPU nodes' root volume in GiB (model storage where an instance type
                                  has no instance store: gco.reconcile.node_storage; unset: not known)
GCO_LOAD_BALANCER_CIDRS           the CIDRs of the load balancer's own subnets, comma-separated: the only
                                  peers of the proxy's serving port (unset: no policy isolates the proxy)
GCO_CONTROL_PLANE_CIDRS           the CIDRs of the cluster's subnets (the API server's pod proxy comes
                                  from there), comma-separated: the only peers of the proxy's status
                                  port (unset: no policy isolates the proxy)

`stacks/regional.py` builds a `ReconcilerEnvironment` and sets `to_env()` on both functions;
`gco.reconcile.runtime` parses it back with `from_env`, so a name or a format cannot drift between
the writer and the reader.
"""

# No `from __future__ import annotations` in the modules of pydantic models: pydantic would compile and
# evaluate every string annotation when the models are defined, at each Lambda cold start.

import ipaddress
from collections.abc import Mapping
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gco.endpoints.errors import InvalidSpecError
from gco.env import (
    AWS_REGION_ENV,
    CLUSTER_NAME_ENV,
    DEFAULT_TABLE,
    GPU_INSTANCE_TYPES_ENV,
    HOME_REGION_ENV,
    RECONCILER_REGION_ENV,
    SWEEP_SECONDS_ENV,
    TABLE_ENV,
    WAIT_SECONDS_ENV,
)
from gco.reconcile.addons import ADDONS_ENV, addons_from_env, addons_value
from gco.reconcile.model_sources import MODEL_SOURCES_ENV, parse_prefixes
from gco.reconcile.nodes import instance_size
from gco.reconcile.proxy.proxy_settings import DEFAULT_PROXY, PROXY_SETTINGS_ENV, ProxySettings
from gco.secrets.endpoint_secrets import ENDPOINT_SECRETS_ENV, parse_allowed

LOAD_BALANCER_CIDRS_ENV = "GCO_LOAD_BALANCER_CIDRS"
CONTROL_PLANE_CIDRS_ENV = "GCO_CONTROL_PLANE_CIDRS"
GPU_DISK_GIB_ENV = "GCO_GPU_DISK_GIB"

# Each field's variable (the error of a bad value names the variable, not the field).
VARIABLES = {
    "cluster_name": CLUSTER_NAME_ENV,
    "region": RECONCILER_REGION_ENV,
    "table_name": TABLE_ENV,
    "home_region": HOME_REGION_ENV,
    "wait_seconds": WAIT_SECONDS_ENV,
    "sweep_seconds": SWEEP_SECONDS_ENV,
    "proxy": PROXY_SETTINGS_ENV,
    "addons": ADDONS_ENV,
    "gpu_instance_types": GPU_INSTANCE_TYPES_ENV,
    "model_sources": MODEL_SOURCES_ENV,
    "endpoint_secrets": ENDPOINT_SECRETS_ENV,
    "load_balancer_cidrs": LOAD_BALANCER_CIDRS_ENV,
    "control_plane_cidrs": CONTROL_PLANE_CIDRS_ENV,
    "gpu_disk_gib": GPU_DISK_GIB_ENV,
}


class ReconcilerEnvironment(BaseModel):
    """What a Regional reconciler function is told by its stack.

    Attributes:
        cluster_name: the Region's EKS cluster.
        region: the Region this reconciler serves.
        table_name: the endpoint table.
        home_region: the table's home Region (None: `gco.aws.home_region`'s default).
        wait_seconds: how long one record may wait for readiness before it is requeued.
        sweep_seconds: how often the scheduled sweep runs (the Regional stack's schedule).
        proxy: the shared proxy's settings.
        addons: the add-ons the Region's cluster has, or None where that is not known.
        gpu_instance_types: the instance types of the Region's GPU node groups (`gco.reconcile.nodes`).
        model_sources: the S3 prefixes endpoint pods may read models from, or None where not known.
        endpoint_secrets: the secrets endpoints may name in `secret_env`, or None where not known.
        load_balancer_cidrs: the load balancer's subnets (IPv4 CIDRs), or None where not known.
        control_plane_cidrs: the cluster's subnets (IPv4 CIDRs), or None where not known.
        gpu_disk_gib: the GPU nodes' root volume (GiB), or None where not known.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster_name: str = Field(min_length=1)
    region: str = Field(min_length=1)
    table_name: str = Field(DEFAULT_TABLE, min_length=1)
    home_region: str | None = None
    wait_seconds: float = Field(10.0, ge=0, le=600)
    sweep_seconds: float = Field(300.0, gt=0, le=86400)
    proxy: ProxySettings = DEFAULT_PROXY
    addons: frozenset[str] | None = None
    gpu_instance_types: tuple[str, ...] = ()
    model_sources: tuple[str, ...] | None = None
    endpoint_secrets: tuple[str, ...] | None = None
    load_balancer_cidrs: tuple[str, ...] | None = None
    control_plane_cidrs: tuple[str, ...] | None = None
    gpu_disk_gib: int | None = Field(None, ge=1)

    @field_validator("load_balancer_cidrs", "control_plane_cidrs")
    @classmethod
    def _cidrs(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for item in value or ():
            ipaddress.IPv4Network(item)  # a ValueError naming the malformed CIDR
        return value

    @field_validator("endpoint_secrets")
    @classmethod
    def _secrets(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None if value is None else parse_allowed(value)  # a ValueError naming the entry

    @field_validator("model_sources")
    @classmethod
    def _prefixes(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None:
            parse_prefixes(value)  # a ValueError naming the malformed prefix
        return value

    @field_validator("gpu_instance_types")
    @classmethod
    def _known_sizes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            instance_size(item)  # a ValueError naming the type and the known sizes of its family
        return value

    def to_env(self) -> dict[str, str]:
        """The variables, as the stack sets them (unknown add-ons and home Region are left unset)."""
        env = {
            CLUSTER_NAME_ENV: self.cluster_name,
            RECONCILER_REGION_ENV: self.region,
            TABLE_ENV: self.table_name,
            WAIT_SECONDS_ENV: f"{self.wait_seconds:g}",
            SWEEP_SECONDS_ENV: f"{self.sweep_seconds:g}",
            PROXY_SETTINGS_ENV: self.proxy.model_dump_json(),
        }
        if self.home_region is not None:
            env[HOME_REGION_ENV] = self.home_region
        if self.addons is not None:
            env[ADDONS_ENV] = addons_value(self.addons)
        if self.gpu_instance_types:
            env[GPU_INSTANCE_TYPES_ENV] = ",".join(self.gpu_instance_types)
        if self.model_sources is not None:
            env[MODEL_SOURCES_ENV] = ",".join(self.model_sources)
        if self.endpoint_secrets is not None:
            env[ENDPOINT_SECRETS_ENV] = ",".join(self.endpoint_secrets)
        if self.load_balancer_cidrs is not None:
            env[LOAD_BALANCER_CIDRS_ENV] = ",".join(self.load_balancer_cidrs)
        if self.control_plane_cidrs is not None:
            env[CONTROL_PLANE_CIDRS_ENV] = ",".join(self.control_plane_cidrs)
        if self.gpu_disk_gib is not None:
            env[GPU_DISK_GIB_ENV] = str(self.gpu_disk_gib)
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Self:
        """Parse the function's environment; an empty variable counts as unset, except
        `GCO_MODEL_SOURCES` and `GCO_ENDPOINT_SECRETS`, where empty means that none is configured.

        Raises:
            InvalidSpecError: a required variable is missing or a value is malformed (names the variable).
        """
        present = {name: value for name, value in env.items() if value != ""}
        fields: dict[str, object] = {
            "cluster_name": present.get(CLUSTER_NAME_ENV),
            "region": present.get(RECONCILER_REGION_ENV) or present.get(AWS_REGION_ENV),
            "table_name": present.get(TABLE_ENV),
            "home_region": present.get(HOME_REGION_ENV),
            "wait_seconds": present.get(WAIT_SECONDS_ENV),
            "sweep_seconds": present.get(SWEEP_SECONDS_ENV),
            "addons": addons_from_env(env),
            "gpu_instance_types": _instance_types(present.get(GPU_INSTANCE_TYPES_ENV)),
            # Set but empty means none configured (every model_source refused), unlike unset.
            "model_sources": _sources(env.get(MODEL_SOURCES_ENV)),
            "endpoint_secrets": _sources(env.get(ENDPOINT_SECRETS_ENV)),
            "load_balancer_cidrs": _sources(present.get(LOAD_BALANCER_CIDRS_ENV)),
            "control_plane_cidrs": _sources(present.get(CONTROL_PLANE_CIDRS_ENV)),
            "gpu_disk_gib": present.get(GPU_DISK_GIB_ENV),
        }
        for required in ("cluster_name", "region"):
            if fields[required] is None:
                raise InvalidSpecError(VARIABLES[required], "is not set in the environment")
        fields["proxy"] = _proxy(present.get(PROXY_SETTINGS_ENV))
        try:
            return cls.model_validate({name: value for name, value in fields.items() if value is not None})
        except ValidationError as error:
            first = error.errors()[0]
            variable = VARIABLES[str(first["loc"][0])]
            raise InvalidSpecError(variable, f"{first['input']!r}: {first['msg']}") from None


def _sources(raw: str | None) -> tuple[str, ...] | None:
    return None if raw is None else tuple(item.strip() for item in raw.split(",") if item.strip())


def _instance_types(raw: str | None) -> tuple[str, ...] | None:
    return tuple(item.strip() for item in raw.split(",")) if raw else None


def _proxy(raw: str | None) -> ProxySettings:
    if not raw:
        return DEFAULT_PROXY
    try:
        return ProxySettings.model_validate_json(raw)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "value"
        raise InvalidSpecError(PROXY_SETTINGS_ENV, f"{where}: {first['msg']}") from None
