"""Desired Kubernetes objects of one endpoint in one Region: a pure function of (record, Region).

What is rendered (all names deterministic, derived from the endpoint name):

- `Deployment <name>` (role server) or, with mooncake, `<name>--prefill` / `<name>--decode` /
  `<name>--proxy` (disaggregated) and `<name>--store` (store); `<name>--canary` for a canary.
  A role's objects are named `names.object_name(<name>, <role>)`: no endpoint name holds `--`, so
  no endpoint's objects share a name with another endpoint's role objects.
- `Service <name>` (the proxy's, with mooncake disaggregated) and one per extra role.
- `HorizontalPodAutoscaler` or KEDA `ScaledObject` named like the Deployment it scales.
- `PodDisruptionBudget` per serving Deployment.
- `NetworkPolicy <name>`: its pods accept traffic only from the proxy and the metrics scraper
  (`render_network.py`).
- The route: an `Ingress route-<name>` of the proxy's class in `gco-system` sending
  `/inference/<name>` to the shared `inference-proxy` Service there (an Ingress may only name a
  Service of its own namespace, so it lives beside the proxy). Its annotations tell the proxy the
  upstream Service and the canary Service and weight; `routes.py` turns the routes into the
  proxy's configuration, which splits traffic by that weight.

A stopped endpoint keeps its objects at 0 replicas, without autoscalers or budgets; a Region that
is not a target (or a deleted record) renders nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gco.endpoints.names import object_name
from gco.endpoints.record import EndpointRecord, ingress_path_for
from gco.endpoints.spec import Autoscaling, EndpointSpec
from gco.reconcile.objects import (
    CANARY_UPSTREAM_ANNOTATION,
    CANARY_WEIGHT_ANNOTATION,
    DEPLOYMENT,
    ENDPOINT_LABEL,
    GENERATION_ANNOTATION,
    GENERATION_LABEL,
    HASH_ANNOTATION,
    INGRESS,
    LIFECYCLE_ANNOTATION,
    LIFECYCLE_LABEL,
    MANAGED_BY,
    MANAGER,
    PROXY_PORT_NAME,
    PROXY_SERVICE,
    REGION_LABEL,
    ROLE_LABEL,
    ROUTE_ROLE,
    SERVICE,
    SYSTEM_NAMESPACE,
    UPSTREAM_ANNOTATION,
    content_hash,
    route_name,
    short,
)
from gco.reconcile.render_network import endpoint_policy
from gco.reconcile.render_pods import mooncake_role, pod_template, selector_labels
from gco.reconcile.render_scaling import autoscaler, disruption_budget
from gco.reconcile.settings import DEFAULT_SETTINGS, RenderSettings

STORE_PORT = 50051
NETWORK_ROLE = "network"  # the role label of the endpoint's NetworkPolicy (render_network.py)


@dataclass(frozen=True)
class _Context:
    record: EndpointRecord
    region: str
    settings: RenderSettings
    secret_digest: str | None = None

    @property
    def name(self) -> str:
        return self.record.endpoint_name

    @property
    def spec(self) -> EndpointSpec:
        return self.record.spec

    @property
    def live(self) -> bool:
        return self.record.desired_state != "stopped"

    def labels(self, role: str) -> dict[str, str]:
        return {
            MANAGED_BY: MANAGER,
            ENDPOINT_LABEL: self.name,
            LIFECYCLE_LABEL: short(self.record.lifecycle_id),
            GENERATION_LABEL: short(self.record.region_generations.get(self.region)),
            REGION_LABEL: self.region,
            ROLE_LABEL: role,
        }

    def meta(self, name: str, role: str, namespace: str | None = None) -> dict[str, Any]:
        return {
            "name": name,
            "namespace": namespace or self.record.namespace,
            "labels": self.labels(role),
            "annotations": {
                LIFECYCLE_ANNOTATION: self.record.lifecycle_id or "",
                GENERATION_ANNOTATION: self.record.region_generations.get(self.region, ""),
            },
        }


def _deployment(
    ctx: _Context,
    name: str,
    role: str,
    replicas: int | None,
    template: dict[str, Any],
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": selector_labels(ctx.name, role)},
        "template": template,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "progressDeadlineSeconds": 1800,
        "revisionHistoryLimit": 3,
    }
    if not ctx.live:
        spec["replicas"] = 0
    elif replicas is not None:  # None: an autoscaler owns the count
        spec["replicas"] = replicas
    return {
        "apiVersion": DEPLOYMENT.api_version,
        "kind": DEPLOYMENT.kind,
        "metadata": ctx.meta(name, role),
        "spec": spec,
    }


def _service(ctx: _Context, name: str, role: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": SERVICE.api_version,
        "kind": SERVICE.kind,
        "metadata": ctx.meta(name, role),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(ctx.name, role),
            "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _scaled_role(
    ctx: _Context, name: str, role: str, replicas: int, scaling: Autoscaling | None, template: dict[str, Any]
) -> list[dict[str, Any]]:
    """A serving Deployment with its autoscaler (when enabled) and disruption budget (when live)."""
    autoscaled = scaling is not None and scaling.enabled
    objects = [_deployment(ctx, name, role, None if autoscaled else replicas, template)]
    if ctx.live:
        if scaling is not None and autoscaled:
            objects.append(
                autoscaler(ctx.meta(name, role), name, ctx.record.namespace, scaling, ctx.settings)
            )
        objects.append(disruption_budget(ctx.meta(name, role), selector_labels(ctx.name, role)))
    return objects


def _gpu_template(ctx: _Context, role: str, image: str, **extra: Any) -> dict[str, Any]:
    return pod_template(
        ctx.name, ctx.spec, ctx.settings, role=role, labels=ctx.labels(role), image=image,
        gpus=ctx.spec.gpu_count, secret_digest=ctx.secret_digest, region=ctx.region, **extra,
    )  # fmt: skip


def _standard(ctx: _Context) -> list[dict[str, Any]]:
    spec = ctx.spec
    objects = _scaled_role(
        ctx, ctx.name, "server", spec.replicas, spec.autoscaling, _gpu_template(ctx, "server", spec.image)
    )
    objects.append(_service(ctx, ctx.name, "server", spec.port))
    if spec.canary is not None and spec.canary.runs_in(ctx.region):
        canary = object_name(ctx.name, "canary")
        template = _gpu_template(ctx, "canary", spec.canary.image)
        objects.append(_deployment(ctx, canary, "canary", spec.canary.replicas, template))
        objects.append(_service(ctx, canary, "canary", spec.port))
    return objects


def _mooncake(ctx: _Context) -> list[dict[str, Any]]:
    spec = ctx.spec
    mooncake = spec.mooncake
    assert mooncake is not None
    objects: list[dict[str, Any]] = []
    store_env: dict[str, str] = {}
    if mooncake.mode in ("store", "both"):
        store = object_name(ctx.name, "store")
        store_env = {"MOONCAKE_MASTER": f"{store}.{ctx.record.namespace}.svc:{STORE_PORT}"}
        template = pod_template(
            ctx.name, spec, ctx.settings, role="store", labels=ctx.labels("store"), image=spec.image,
            gpus=0, serving=False, port=STORE_PORT, command=["mooncake_master"],
            extra_args=["--port", str(STORE_PORT)],
            extra_env={"MOONCAKE_GLOBAL_SEGMENT_SIZE": mooncake.store_global_segment_size},
        )  # fmt: skip
        objects.append(_deployment(ctx, store, "store", 1, template))
        objects.append(_service(ctx, store, "store", STORE_PORT))
    if mooncake.mode == "store":
        template = _gpu_template(ctx, "server", spec.image, extra_env=store_env)
        objects += _scaled_role(ctx, ctx.name, "server", spec.replicas, spec.autoscaling, template)
        objects.append(_service(ctx, ctx.name, "server", spec.port))
        return objects
    role_scaling = mooncake.autoscaling
    efa = mooncake.transfer_protocol == "rdma"
    for role, replicas in (("prefill", mooncake.prefill_replicas), ("decode", mooncake.decode_replicas)):
        args, env = mooncake_role(mooncake, role)
        template = _gpu_template(
            ctx, role, spec.image, extra_args=args, extra_env={**env, **store_env}, efa=efa
        )
        scaling = getattr(role_scaling, role) if role_scaling is not None else None
        objects += _scaled_role(ctx, object_name(ctx.name, role), role, replicas, scaling, template)
        objects.append(_service(ctx, object_name(ctx.name, role), role, spec.port))
    upstreams = {
        "PREFILL_URL": f"http://{object_name(ctx.name, 'prefill')}.{ctx.record.namespace}.svc:{spec.port}",
        "DECODE_URL": f"http://{object_name(ctx.name, 'decode')}.{ctx.record.namespace}.svc:{spec.port}",
        "PORT": str(spec.port),
    }
    assert mooncake.proxy_image is not None
    template = pod_template(
        ctx.name, spec, ctx.settings, role="proxy", labels=ctx.labels("proxy"), image=mooncake.proxy_image,
        gpus=0, serving=False, extra_env=upstreams,
    )  # fmt: skip
    objects.append(_deployment(ctx, object_name(ctx.name, "proxy"), "proxy", 1, template))
    objects.append(_service(ctx, ctx.name, "proxy", spec.port))
    return objects


def _route(ctx: _Context) -> dict[str, Any]:
    spec = ctx.spec
    namespace = ctx.record.namespace
    meta = ctx.meta(route_name(ctx.name), ROUTE_ROLE, SYSTEM_NAMESPACE)
    meta["annotations"][UPSTREAM_ANNOTATION] = f"http://{ctx.name}.{namespace}.svc:{spec.port}"
    if spec.canary is not None and spec.canary.runs_in(ctx.region):
        meta["annotations"][CANARY_UPSTREAM_ANNOTATION] = (
            f"http://{object_name(ctx.name, 'canary')}.{namespace}.svc:{spec.port}"
        )
        meta["annotations"][CANARY_WEIGHT_ANNOTATION] = str(spec.canary.weight_in(ctx.region))
    path = ctx.record.ingress_path or ingress_path_for(ctx.name)
    backend = {"service": {"name": PROXY_SERVICE, "port": {"name": PROXY_PORT_NAME}}}
    return {
        "apiVersion": INGRESS.api_version,
        "kind": INGRESS.kind,
        "metadata": meta,
        "spec": {
            "ingressClassName": ctx.settings.ingress_class,
            "rules": [{"http": {"paths": [{"path": path, "pathType": "Prefix", "backend": backend}]}}],
        },
    }


def _sealed(obj: dict[str, Any]) -> dict[str, Any]:
    """The object with the digest of its own content as an annotation (compared before applying)."""
    obj["metadata"]["annotations"][HASH_ANNOTATION] = content_hash(obj)
    return obj


def render(
    record: EndpointRecord,
    region: str,
    settings: RenderSettings = DEFAULT_SETTINGS,
    *,
    secret_digest: str | None = None,
) -> list[dict[str, Any]]:
    """Every object the endpoint should have in `region`, each carrying its content digest.

    `secret_digest` (the digest of the versions of the endpoint's secrets read now, never a value:
    `gco.secrets.endpoint_secrets.sources_digest`) goes on the serving pods' template, so a rotated secret
    rolls them. Returns an empty list for a deleted record, a legacy record, or a Region that is not
    a target.
    """
    if record.is_deleted or record.is_legacy or region not in record.target_regions:
        return []
    ctx = _Context(record, region, settings, secret_digest)
    objects = _mooncake(ctx) if ctx.spec.mooncake is not None else _standard(ctx)
    internal = ctx.spec.mooncake is not None
    objects.append(
        endpoint_policy(ctx.meta(ctx.name, NETWORK_ROLE), ctx.name, record.namespace, internal=internal)
    )
    objects.append(_route(ctx))
    return [_sealed(obj) for obj in objects]


def desired_replicas(obj: dict[str, Any]) -> int | None:
    """The replicas a rendered Deployment asks for; None when an autoscaler owns the count."""
    value = obj.get("spec", {}).get("replicas")
    return int(value) if value is not None else None
