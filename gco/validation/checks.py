"""The matrix's checks of one endpoint, of the shared proxy, and of what is left after destruction.

Each returns an `Outcome` (passed, a one-line detail, data for the evidence) and never raises for
what it observes: a wrong answer is a failed check, not an error. What the cluster says is read
through the `ClusterReader` port, what the endpoint answers through `EndpointHttp`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gco.endpoints.namespaces import SYSTEM_NAMESPACE
from gco.endpoints.record import EndpointRecord
from gco.reconcile.objects import (
    DEPLOYMENT,
    ENDPOINT_LABEL,
    HPA,
    LIFECYCLE_LABEL,
    ObjectRef,
    kind_of,
    lifecycle_of,
    short,
)
from gco.reconcile.proxy.render_proxy import PROXY_CONTAINER, PROXY_DEPLOYMENT, PROXY_HPA
from gco.validation import adapters
from gco.validation.identity import ACCELERATOR, HPA_METRIC, PROXY_METRIC_TYPE
from gco.validation.ports import ClusterReader, EndpointHttp
from gco.validation.settings import MatrixSettings, Runtime

DETAIL_LIMIT = 300


@dataclass(frozen=True)
class Outcome:
    passed: bool
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


def endpoint_spec(settings: MatrixSettings, runtime: Runtime, role: str) -> dict[str, Any]:
    """The endpoint spec of one runtime in one role (`baseline`: fixed replicas; `hpa`: CPU HPA)."""
    spec: dict[str, Any] = {
        "image": runtime.image,
        "require_digest": True,
        "framework": runtime.framework,
        "port": runtime.port,
        "gpu_count": settings.gpu_count,
        "accelerator": ACCELERATOR,
        "model_id": runtime.model_id,
        "model_revision": runtime.model_revision,
        "health_check_path": settings.health_path,
        "env": adapters.launch_env(runtime),
        "args": adapters.launch_args(runtime),
        "replicas": settings.baseline_replicas,
    }
    if role == "hpa":
        spec["replicas"] = settings.autoscale_initial_replicas
        spec["autoscaling"] = {
            "enabled": True,
            "min_replicas": settings.hpa_min_replicas,
            "max_replicas": settings.hpa_max_replicas,
            "metrics": [{"type": HPA_METRIC, "target": settings.hpa_cpu_target}],
        }
    return spec


@dataclass(frozen=True)
class Readiness:
    """One endpoint in one Region as the record shows it: ready or not, and a terminal error if any.

    `error` is set only for an `error` status of the record's current lifecycle: the reconciler
    writes it for what no retry mends (a namespace it is not granted, a missing add-on), so the
    ready step ends at once with it rather than waiting out its timeout.
    """

    done: bool
    state: str
    replicas_ready: int = 0
    error: str | None = None


def ready(record: EndpointRecord | None, region: str) -> Readiness:
    """Whether the record runs its current lifecycle in `region` with every replica ready."""
    if record is None:
        return Readiness(False, "no record")
    status = record.region_status.get(region)
    if status is None:
        return Readiness(False, "pending")
    current = status.lifecycle_id == record.lifecycle_id
    done = current and status.state == "running" and status.replicas_ready >= max(1, status.replicas_desired)
    error = (status.error or "no reason given") if current and status.state == "error" else None
    state = f"{status.state} {status.replicas_ready}/{status.replicas_desired}"
    return Readiness(done, state, status.replicas_ready if current else 0, error)


def _short(value: Any) -> str:
    return str(value)[:DETAIL_LIMIT]


def health(http: EndpointHttp, region: str, name: str, settings: MatrixSettings) -> Outcome:
    answer = http.get(region, name, settings.health_path)
    data = {"status": answer.status, "latency_ms": round(answer.latency_ms, 3)}
    if not 200 <= answer.status < 300:
        return Outcome(False, f"GET {settings.health_path}: HTTP {answer.status} {_short(answer.body)}", data)
    return Outcome(True, f"GET {settings.health_path}: HTTP {answer.status}", data)


def _objects(reader: ClusterReader, name: str, lifecycle_id: str | None) -> list[dict[str, Any]]:
    found = reader.list({ENDPOINT_LABEL: name})
    return [obj for obj in found if lifecycle_id is None or lifecycle_of(obj) == lifecycle_id]


def _serving_container(deployment: Mapping[str, Any]) -> Mapping[str, Any]:
    containers = ((deployment.get("spec") or {}).get("template") or {}).get("spec", {}).get(
        "containers"
    ) or []
    for container in containers:
        if "readinessProbe" in container:
            return container  # type: ignore[no-any-return]
    return containers[0] if containers else {}


def model_info(
    http: EndpointHttp,
    reader: ClusterReader,
    region: str,
    name: str,
    runtime: Runtime,
    lifecycle_id: str | None,
) -> Outcome:
    """The served model id (and revision, where the engine reports it) equal the runtime's."""
    path = adapters.model_info_path(runtime)
    answer = http.get(region, name, path)
    data: dict[str, Any] = {"status": answer.status, "latency_ms": round(answer.latency_ms, 3), "path": path}
    if not 200 <= answer.status < 300:
        return Outcome(False, f"GET {path}: HTTP {answer.status} {_short(answer.body)}", data)
    ids, revision = adapters.served_model(runtime, answer.body)
    data.update(served_ids=ids, served_revision=revision)
    if runtime.model_id not in ids:
        return Outcome(False, f"GET {path}: serves {ids}, not {runtime.model_id!r}", data)
    if revision is None:
        # vLLM does not report its revision: read the one its Deployment launched it with.
        deployments = [o for o in _objects(reader, name, lifecycle_id) if kind_of(o) == DEPLOYMENT]
        launched = (
            adapters.launched_revision(runtime, _serving_container(deployments[0])) if deployments else None
        )
        data["launched_revision"] = launched
        if launched != runtime.model_revision:
            return Outcome(
                False, f"the Deployment launched revision {launched!r}, not {runtime.model_revision!r}", data
            )
        return Outcome(
            True, f"serves {runtime.model_id} (revision {launched} from its launch arguments)", data
        )
    if revision != runtime.model_revision:
        return Outcome(
            False, f"GET {path}: serves revision {revision!r}, not {runtime.model_revision!r}", data
        )
    return Outcome(True, f"serves {runtime.model_id} at {revision}", data)


def request(
    http: EndpointHttp, region: str, name: str, settings: MatrixSettings, runtime: Runtime
) -> Outcome:
    path = adapters.request_path(runtime)
    answer = http.post(region, name, path, adapters.request_body(settings, runtime))
    data = {"status": answer.status, "latency_ms": round(answer.latency_ms, 3), "path": path}
    if not 200 <= answer.status < 300:
        return Outcome(False, f"POST {path}: HTTP {answer.status} {_short(answer.body)}", data)
    text = adapters.response_text(runtime, answer.body)
    field_name = adapters.response_field(runtime)
    if text is None:
        return Outcome(
            False, f"POST {path}: {field_name} is not a non-empty string: {_short(answer.body)}", data
        )
    data["characters"] = len(text)
    return Outcome(True, f"POST {path}: {field_name} has {len(text)} characters", data)


def hpa_replicas(reader: ClusterReader, name: str, lifecycle_id: str | None) -> tuple[int, int]:
    """The endpoint HPA's `status.currentReplicas` and its Deployment's ready replicas (0 when absent)."""
    objects = _objects(reader, name, lifecycle_id)
    current = ready_count = 0
    for obj in objects:
        status = obj.get("status") or {}
        if kind_of(obj) == HPA:
            current = int(status.get("currentReplicas") or 0)
        elif kind_of(obj) == DEPLOYMENT:
            ready_count = int(status.get("readyReplicas") or 0)
    return current, ready_count


def proxy(reader: ClusterReader, settings: MatrixSettings) -> Outcome:
    """The shared proxy's TLS container CPU request, and its HPA's metric type and target."""
    deployment = reader.get(DEPLOYMENT, SYSTEM_NAMESPACE, PROXY_DEPLOYMENT)
    hpa = reader.get(HPA, SYSTEM_NAMESPACE, PROXY_HPA)
    if deployment is None or hpa is None:
        missing = PROXY_DEPLOYMENT if deployment is None else PROXY_HPA
        return Outcome(False, f"{SYSTEM_NAMESPACE}/{missing} not found")
    containers = ((deployment.get("spec") or {}).get("template") or {}).get("spec", {}).get(
        "containers"
    ) or []
    tls: dict[str, Any] = next((c for c in containers if c.get("name") == PROXY_CONTAINER), {})
    cpu = ((tls.get("resources") or {}).get("requests") or {}).get("cpu")
    metric = ((hpa.get("spec") or {}).get("metrics") or [{}])[0]
    resource = metric.get("containerResource") or metric.get("resource") or {}
    target = (resource.get("target") or {}).get("averageUtilization")
    data = {
        "cpu_request": cpu,
        "metric_type": metric.get("type"),
        "metric_container": resource.get("container"),
        "cpu_target": target,
    }
    problems = []
    if cpu != settings.proxy_tls_cpu_request:
        problems.append(f"{PROXY_CONTAINER} CPU request is {cpu!r}, not {settings.proxy_tls_cpu_request!r}")
    if metric.get("type") != PROXY_METRIC_TYPE or resource.get("container") != PROXY_CONTAINER:
        problems.append(
            f"{PROXY_HPA} metric is {metric.get('type')!r} of {resource.get('container')!r}, "
            f"not {PROXY_METRIC_TYPE} of {PROXY_CONTAINER!r}"
        )
    if target != settings.proxy_tls_cpu_target:
        problems.append(f"{PROXY_HPA} CPU target is {target!r}, not {settings.proxy_tls_cpu_target}")
    if problems:
        return Outcome(False, "; ".join(problems), data)
    return Outcome(
        True, f"{PROXY_CONTAINER} requests {cpu}; {PROXY_HPA} on {PROXY_METRIC_TYPE} cpu at {target}%", data
    )


def leftovers(readers: Mapping[str, ClusterReader], lifecycle_ids: Sequence[str]) -> dict[str, list[str]]:
    """Per Region, the objects still labelled with one of the run's lifecycles."""
    shorts = sorted({short(lifecycle) for lifecycle in lifecycle_ids if lifecycle})
    found: dict[str, list[str]] = {}
    for region, reader in readers.items():
        objects = reader.list_any(LIFECYCLE_LABEL, shorts) if shorts else []
        names = [str(ObjectRef.of(obj)) for obj in objects]
        if names:
            found[region] = names
    return found
