"""Pure rendering of the serving pods: containers, probes, GPU resources, tolerations, roles.

Every function is a pure function of its arguments and returns plain JSON-ready dicts.
"""

from __future__ import annotations

import json
from typing import Any

from gco import engines
from gco.endpoints.spec import EndpointSpec, Mooncake
from gco.engines.base import Launch
from gco.env import AWS_REGION_ENV, DEFAULT_REGION_ENV
from gco.reconcile.model_sources import MODEL_SERVICE_ACCOUNT
from gco.reconcile.node_storage import model_volume_gib
from gco.reconcile.nodes import ACCELERATOR_TAINTS, capacity_labels, gpu_pod_requests, gpu_type_selector
from gco.reconcile.objects import ENDPOINT_LABEL, ROLE_LABEL
from gco.reconcile.settings import RenderSettings
from gco.secrets.endpoint_secrets import SOURCES_ANNOTATION, secret_env_list

GPU_RESOURCE = {"nvidia": "nvidia.com/gpu", "neuron": "aws.amazon.com/neuron"}
EFA_RESOURCE = "vpc.amazonaws.com/efa"
EPHEMERAL_STORAGE = "ephemeral-storage"


# The Prometheus chart's `kubernetes-pods` job scrapes pods annotated so: the engines serve their
# queue and token metrics (queue_depth autoscaling) on /metrics of the serving port.
SCRAPE_ANNOTATIONS = ("prometheus.io/scrape", "prometheus.io/port", "prometheus.io/path")


def scrape_annotations(port: int) -> dict[str, str]:
    scrape, port_key, path = SCRAPE_ANNOTATIONS
    return {scrape: "true", port_key: str(port), path: "/metrics"}


def selector_labels(name: str, role: str) -> dict[str, str]:
    """The immutable Deployment selector: endpoint and role only (never a token)."""
    return {ENDPOINT_LABEL: name, ROLE_LABEL: role}


def engine_launch(spec: EndpointSpec, model: str | None) -> Launch:
    """What the serving container asks of its framework: a revision only for a Hub model (a synced
    model directory is the revision it was synced at)."""
    revision = spec.model_revision if not spec.model_source else None
    return Launch(model=model, revision=revision, port=spec.port, gpus=spec.gpu_count)


def resources(
    spec: EndpointSpec, gpus: int, *, efa: bool = False, instance_types: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The container's resources: its spec's, GPUs, and for a GPU container the CPU and memory derived
    from the node groups' instance types where the spec does not request them itself."""
    derived = gpu_pod_requests(instance_types, gpus, spec.gpu_type) if spec.accelerator == "nvidia" else {}
    # A limit without a request makes the request equal the limit (Kubernetes' defaulting): kept.
    derived = {key: value for key, value in derived.items() if key not in spec.resources.limits}
    requests = {**derived, **spec.resources.requests}
    limits = dict(spec.resources.limits)
    if gpus > 0:
        resource = GPU_RESOURCE[spec.accelerator]
        requests[resource] = limits[resource] = str(gpus)
    if efa:
        requests[EFA_RESOURCE] = limits[EFA_RESOURCE] = "1"
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def probes(spec: EndpointSpec) -> dict[str, Any]:
    """Startup (model loading may take many minutes), readiness and liveness on the health path."""
    action = {"httpGet": {"path": spec.health_check_path, "port": "http"}}
    return {
        "startupProbe": {**action, "periodSeconds": 10, "failureThreshold": 180, "timeoutSeconds": 5},
        "readinessProbe": {**action, "periodSeconds": 10, "failureThreshold": 3, "timeoutSeconds": 5},
        "livenessProbe": {**action, "periodSeconds": 20, "failureThreshold": 6, "timeoutSeconds": 10},
    }


def tolerations(spec: EndpointSpec, settings: RenderSettings, gpus: int) -> list[dict[str, Any]]:
    """The accelerator node groups' taint (gco.reconcile.nodes, via the settings) for pods that ask for one,
    then the spec's own tolerations."""
    out: list[dict[str, Any]] = []
    if gpus > 0:
        key = settings.gpu_taint_key if spec.accelerator == "nvidia" else settings.neuron_taint_key
        out.append({"key": key, "operator": "Exists", "effect": ACCELERATOR_TAINTS[spec.accelerator].effect})
    for item in spec.tolerations:
        toleration: dict[str, Any] = {"operator": item.operator}
        if item.key is not None:
            toleration["key"] = item.key
        if item.value:
            toleration["value"] = item.value
        if item.effect is not None:
            toleration["effect"] = item.effect
        if item.toleration_seconds is not None:
            toleration["tolerationSeconds"] = item.toleration_seconds
        if toleration not in out:
            out.append(toleration)
    return out


def node_selector(spec: EndpointSpec, gpus: int) -> dict[str, str]:
    """Capacity type (gco's own label on every node group, which a group at zero nodes carries too)
    and, for a GPU pod naming its GPU model, the GPU node groups' model label (gco.reconcile.nodes);
    the spec's own selector last."""
    selected = capacity_labels(spec.capacity_type)
    if gpus > 0 and spec.gpu_type is not None:
        selected.update(gpu_type_selector(spec.gpu_type))
    selected.update(spec.node_selector)
    return selected


def env_list(values: dict[str, str]) -> list[dict[str, str]]:
    return [{"name": key, "value": value} for key, value in sorted(values.items())]


def mooncake_role(mooncake: Mooncake, role: str) -> tuple[list[str], dict[str, str]]:
    """Extra vLLM arguments and environment of a prefill (KV producer) or decode (KV consumer) pod."""
    transfer = {
        "kv_connector": "MooncakeConnectorV1",
        "kv_role": "kv_producer" if role == "prefill" else "kv_consumer",
    }
    env = {
        "MOONCAKE_PROTOCOL": mooncake.transfer_protocol,
        "MOONCAKE_ROLE": role,
        "MOONCAKE_GLOBAL_SEGMENT_SIZE": mooncake.store_global_segment_size,
        "MOONCAKE_LOCAL_BUFFER_SIZE": mooncake.store_local_buffer_size,
    }
    return ["--kv-transfer-config", json.dumps(transfer, sort_keys=True)], env


def _model_storage(
    spec: EndpointSpec,
    settings: RenderSettings,
    container: dict[str, Any],
    mounts: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    region: str | None,
) -> list[dict[str, Any]]:
    """The model's room on the node (gco.reconcile.node_storage) and, for a `model_source`, the directory
    it is synced into (an `emptyDir`, limited to that room) with the init container that syncs it; returns
    the init containers. The room is ephemeral storage the serving container requests: the synced
    directory or, for a Hub model, the download cache in its writable layer.

    The sync is told its `region` (`AWS_REGION`, and `AWS_DEFAULT_REGION`, which every AWS CLI v2
    reads): the CLI would otherwise ask the instance metadata service, last in its Region chain
    (aws/aws-cli `awscli/clidriver.py`, `_construct_cli_region_chain`), which the GPU nodes close to
    pods (hop limit 1, stacks/constructs/node_storage.py). Its credentials come from the pod's Pod
    Identity association."""
    room = f"{model_volume_gib(spec.model_size_gib)}Gi" if spec.model_size_gib is not None else None
    if room is not None:
        container["resources"].setdefault("requests", {})[EPHEMERAL_STORAGE] = room
    if not spec.model_source:
        return []
    mounts.append({"name": "model", "mountPath": settings.model_dir})
    volumes.append({"name": "model", "emptyDir": {"sizeLimit": room} if room is not None else {}})
    sync: dict[str, Any] = {
        "name": "model-sync",
        "image": settings.model_sync_image,
        "args": ["s3", "sync", "--no-progress", spec.model_source, settings.model_dir],
        "volumeMounts": [{"name": "model", "mountPath": settings.model_dir}],
    }
    if region is not None:
        sync["env"] = env_list({AWS_REGION_ENV: region, DEFAULT_REGION_ENV: region})
    return [sync]


def pod_template(
    name: str,
    spec: EndpointSpec,
    settings: RenderSettings,
    *,
    role: str,
    labels: dict[str, str],
    image: str,
    gpus: int,
    extra_args: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
    serving: bool = True,
    efa: bool = False,
    port: int | None = None,
    command: list[str] | None = None,
    secret_digest: str | None = None,
    region: str | None = None,
) -> dict[str, Any]:
    """The pod template of one role; `serving` pods run the model, others (proxy, store) do not.
    A serving pod's model sync is told `region` (`_model_storage`).

    A serving pod of a spec with `secret_env` carries `secret_digest` (the version ids of its secrets,
    digested) as an annotation: a rotation changes the template, and the Deployment rolls its pods.
    """
    container: dict[str, Any] = {
        "name": "server" if serving else role,
        "image": image,
        "ports": [{"name": "http", "containerPort": port or spec.port, "protocol": "TCP"}],
    }
    volumes: list[dict[str, Any]] = []
    init_containers: list[dict[str, Any]] = []
    from_secrets: list[dict[str, Any]] = []
    if serving:
        # Values from Secrets Manager by reference only: the reconciler writes them into the
        # endpoint's Kubernetes Secret (gco.secrets.endpoint_secrets), never into this template.
        from_secrets = secret_env_list(name, spec.secret_env)
        model = settings.model_dir if spec.model_source else spec.model_id
        framework, launch = engines.get(spec.framework), engine_launch(spec, model)
        env = {**framework.launch_env(launch), **spec.env, **(extra_env or {})}
        args = list(spec.args) if spec.args is not None else framework.launch_args(launch)
        args += [*spec.extra_args, *(extra_args or [])]
        if spec.command is not None:
            container["command"] = list(spec.command)
        if args:
            container["args"] = args
        container.update(probes(spec))
        container["resources"] = resources(spec, gpus, efa=efa, instance_types=settings.gpu_instance_types)
        mounts = [{"name": "shm", "mountPath": "/dev/shm"}]  # noqa: S108 - the pod's shared memory
        volumes.append({"name": "shm", "emptyDir": {"medium": "Memory"}})
        init_containers = _model_storage(spec, settings, container, mounts, volumes, region)
        container["volumeMounts"] = mounts
    else:
        env = dict(extra_env or {})
        if command is not None:
            container["command"] = command
        if extra_args:
            container["args"] = list(extra_args)
        container["readinessProbe"] = {"tcpSocket": {"port": "http"}, "periodSeconds": 5}
    if env or from_secrets:
        container["env"] = [*env_list(env), *from_secrets]
    pod_spec: dict[str, Any] = {
        # Its EKS Pod Identity role reads the configured model prefixes only (gco.reconcile.model_sources).
        "serviceAccountName": MODEL_SERVICE_ACCOUNT,
        "containers": [container],
        "terminationGracePeriodSeconds": settings.termination_grace_seconds,
        "nodeSelector": node_selector(spec, gpus),
    }
    if tols := tolerations(spec, settings, gpus):
        pod_spec["tolerations"] = tols
    if init_containers:
        pod_spec["initContainers"] = init_containers
    if volumes:
        pod_spec["volumes"] = volumes
    metadata: dict[str, Any] = {"labels": {**labels, **selector_labels(name, role)}}
    if serving:
        metadata["annotations"] = scrape_annotations(port or spec.port)
        if spec.secret_env and secret_digest is not None:
            metadata["annotations"][SOURCES_ANNOTATION] = secret_digest
    return {"metadata": metadata, "spec": pod_spec}
