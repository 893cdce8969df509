"""The matrix settings: a frozen model, built only after every rule held, checked in a fixed order.

The rules run in one documented order and the first broken one is the error (a `SettingsError`
naming its field path), so the same bad file always gets the same single line. The keys are a
stable surface: scripts and the GPU runner's jobs write them. A bool is never an int here (JSON's
`true` would otherwise pass as 1).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict

from gco import engines
from gco.engines.tgi import Tgi
from gco.engines.vllm import Vllm
from gco.reconcile.access import ungranted_namespace
from gco.validation.errors import SettingsError

# The matrix's engines, in this order, each on its image's own port (`gco.engines`).
FRAMEWORK_ORDER: tuple[str, ...] = (Vllm.name, Tgi.name)
PORTS: dict[str, int] = {name: engines.get(name).default_port for name in FRAMEWORK_ORDER}
ORDER_TEXT = " then ".join(FRAMEWORK_ORDER)
ENDPOINT_COUNT = 4
INITIAL_REPLICAS = 1
HPA_REPLICAS = 2
MIN_STABILITY_INTERVALS = 2
HEALTH_PATH = "/health"
# How long capacity may take: the GPU runner's instance (the runner's state machine reads it from a
# matrix job's settings) and each endpoint's first ready replica (`gco.validation.waits`).
QUEUE_TIMEOUT = "queue_timeout_seconds"

IMAGE = re.compile(r"[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}")
REVISION = re.compile(r"[0-9a-f]{40}")
REGION = re.compile(r"[a-z0-9]+(-[a-z0-9]+)+")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
MILLICORES = re.compile(r"[1-9][0-9]*m")
# Marks a field whose value must be a positive int: `parse_settings` checks them in the model's order.
POSITIVE = "positive"
PositiveInt = Annotated[int, POSITIVE]


class Runtime(BaseModel):
    """One engine of the matrix: a digest-pinned image serving one model at one commit."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    framework: str  # one of FRAMEWORK_ORDER
    image: str
    model_id: str
    model_revision: str
    port: int


class MatrixSettings(BaseModel):
    """Everything a matrix run is given; see `parse_settings` for the rules."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    selected_region: str
    inference_runtimes: tuple[Runtime, Runtime]
    request_prompt: str
    request_max_tokens: PositiveInt
    namespace: str
    gpu_count: int
    endpoint_count: PositiveInt
    baseline_replicas: PositiveInt
    autoscale_initial_replicas: PositiveInt
    hpa_min_replicas: PositiveInt
    hpa_max_replicas: PositiveInt
    hpa_cpu_target: int
    hpa_stability_intervals: PositiveInt
    health_path: str
    proxy_tls_cpu_request: str
    proxy_tls_cpu_target: int
    command_timeout_seconds: PositiveInt
    readiness_timeout_seconds: PositiveInt
    hpa_timeout_seconds: PositiveInt
    deletion_timeout_seconds: PositiveInt
    job_timeout_seconds: PositiveInt
    queue_timeout_seconds: PositiveInt
    poll_interval_seconds: PositiveInt
    monitor_interval_seconds: PositiveInt
    destroy_attempts: PositiveInt
    destroy_retry_delay_seconds: PositiveInt
    consent: bool


# The settings' keys and the runtimes' keys, in the models' order (a stable surface: scripts and the
# GPU runner's jobs write them); the fields that must be positive ints, in the order they are checked.
KEYS = tuple(MatrixSettings.model_fields)
RUNTIME_KEYS = tuple(Runtime.model_fields)
POSITIVE_INTS = tuple(
    name for name, field in MatrixSettings.model_fields.items() if POSITIVE in field.metadata
)


def is_int(value: object) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def _get(raw: Mapping[str, Any], key: str, where: str = "") -> Any:
    if key not in raw:
        raise SettingsError(f"{where}{key}", "is required")
    return raw[key]


def _string(raw: Mapping[str, Any], key: str, where: str = "") -> str:
    value = _get(raw, key, where)
    if not isinstance(value, str):
        raise SettingsError(f"{where}{key}", "must be a string")
    return value


def _runtime(raw: Any, index: int, framework: str) -> Runtime:
    where = f"inference_runtimes[{index}]."
    if not isinstance(raw, Mapping):
        raise SettingsError(
            where[:-1], "must be a mapping of framework, image, model_id, model_revision, port"
        )
    for key in raw:
        if key not in RUNTIME_KEYS:
            raise SettingsError(f"{where}{key}", f"is not a runtime key (keys: {', '.join(RUNTIME_KEYS)})")
    if _get(raw, "framework", where) != framework:
        raise SettingsError(f"{where}framework", f"the runtimes must be exactly {ORDER_TEXT}")
    image = _string(raw, "image", where)
    if not IMAGE.fullmatch(image):
        raise SettingsError(f"{where}image", "must be name@sha256:<64 lowercase hex> (pinned by digest)")
    model_id = _string(raw, "model_id", where)
    if not model_id.strip() or model_id != model_id.strip():
        raise SettingsError(f"{where}model_id", "must be non-empty with no leading or trailing space")
    revision = _string(raw, "model_revision", where)
    if not REVISION.fullmatch(revision):
        raise SettingsError(f"{where}model_revision", "must be a full commit: 40 lowercase hex characters")
    port = _get(raw, "port", where)
    if not is_int(port) or port != PORTS[framework]:
        raise SettingsError(f"{where}port", f"must be {PORTS[framework]} for {framework}")
    return Runtime(framework=framework, image=image, model_id=model_id, model_revision=revision, port=port)


def _runtimes(raw: Mapping[str, Any]) -> tuple[Runtime, Runtime]:
    value = _get(raw, "inference_runtimes")
    if not isinstance(value, list | tuple) or len(value) != len(FRAMEWORK_ORDER):
        raise SettingsError("inference_runtimes", f"must list exactly two runtimes: {ORDER_TEXT}")
    first, second = (_runtime(item, i, FRAMEWORK_ORDER[i]) for i, item in enumerate(value))
    if first.image.rpartition("@sha256:")[2] == second.image.rpartition("@sha256:")[2]:
        raise SettingsError(
            "inference_runtimes[1].image",
            f"must have a digest distinct from the {FRAMEWORK_ORDER[0]} image's",
        )
    return first, second


def _int_between(raw: Mapping[str, Any], key: str, low: int, high: int) -> int:
    value = _get(raw, key)
    if not is_int(value) or not low <= value <= high:
        raise SettingsError(key, f"must be an integer from {low} to {high}")
    return int(value)


def _exactly(values: Mapping[str, Any], key: str, wanted: int, why: str) -> None:
    if values[key] != wanted:
        raise SettingsError(key, f"must be {wanted} ({why})")


def parse_settings(raw: Mapping[str, Any]) -> MatrixSettings:
    """Check every rule in order and return the frozen settings.

    The order: unknown keys; the runtimes (exactly vllm then tgi; each image pinned by a lowercase
    sha256 digest, model_id non-empty and trimmed, model_revision 40 lowercase hex, port 8000 for
    vllm and 8080 for tgi; the two digests distinct); selected_region; request_prompt; namespace (a
    DNS label the reconciler is granted, `gco.reconcile.access.RECONCILER_GRANT`); gpu_count; every
    count, interval, timeout and attempt a positive int; endpoint_count 4; the
    initial replicas 1; HPA min = max = 2; hpa_cpu_target 1-100; hpa_stability_intervals >= 2;
    health_path `/health`; proxy_tls_cpu_request; proxy_tls_cpu_target 1-100; consent.

    Raises:
        SettingsError: the first broken rule, naming its field path.
    """
    if not isinstance(raw, Mapping):
        raise SettingsError("settings", "must be a mapping of settings keys")
    for key in raw:
        if key not in KEYS:
            raise SettingsError(str(key)[:80], "is not a settings key")
    runtimes = _runtimes(raw)
    region = _string(raw, "selected_region")
    if not REGION.fullmatch(region):
        raise SettingsError("selected_region", "must be a lowercase Region name such as us-east-1")
    prompt = _string(raw, "request_prompt")
    if not prompt.strip():
        raise SettingsError("request_prompt", "must not be blank")
    namespace = _string(raw, "namespace")
    if not DNS_LABEL.fullmatch(namespace):
        raise SettingsError("namespace", "must be a DNS label (lowercase letters, digits, '-'; at most 63)")
    ungranted = ungranted_namespace(namespace)
    if ungranted is not None:  # the reconciler would refuse it with a terminal status
        raise SettingsError("namespace", ungranted)
    gpu_count = _get(raw, "gpu_count")
    if not is_int(gpu_count) or gpu_count < 0:
        raise SettingsError("gpu_count", "must be an integer >= 0")
    values: dict[str, Any] = {}
    for key in POSITIVE_INTS:
        value = _get(raw, key)
        if not is_int(value) or value < 1:
            raise SettingsError(key, "must be a positive integer")
        values[key] = value
    _exactly(values, "endpoint_count", ENDPOINT_COUNT, "a baseline and an HPA endpoint per runtime")
    _exactly(values, "baseline_replicas", INITIAL_REPLICAS, "every endpoint starts with one replica")
    _exactly(values, "autoscale_initial_replicas", INITIAL_REPLICAS, "every endpoint starts with one replica")
    _exactly(values, "hpa_min_replicas", HPA_REPLICAS, "the HPA must hold exactly two replicas")
    _exactly(values, "hpa_max_replicas", HPA_REPLICAS, "the HPA must hold exactly two replicas")
    hpa_target = _int_between(raw, "hpa_cpu_target", 1, 100)
    if values["hpa_stability_intervals"] < MIN_STABILITY_INTERVALS:
        raise SettingsError("hpa_stability_intervals", f"must be at least {MIN_STABILITY_INTERVALS}")
    health = _string(raw, "health_path")
    if health != HEALTH_PATH:
        raise SettingsError("health_path", f"must be {HEALTH_PATH}")
    cpu_request = _string(raw, "proxy_tls_cpu_request")
    if not MILLICORES.fullmatch(cpu_request):
        raise SettingsError("proxy_tls_cpu_request", "must be a positive millicore quantity such as 250m")
    proxy_target = _int_between(raw, "proxy_tls_cpu_target", 1, 100)
    if _get(raw, "consent") is not True:
        raise SettingsError("consent", "must be true: the run deploys and destroys endpoints")
    return MatrixSettings(
        selected_region=region,
        inference_runtimes=runtimes,
        request_prompt=prompt,
        namespace=namespace,
        gpu_count=gpu_count,
        hpa_cpu_target=hpa_target,
        health_path=health,
        proxy_tls_cpu_request=cpu_request,
        proxy_tls_cpu_target=proxy_target,
        consent=True,
        **values,
    )


def settings_document(settings: MatrixSettings) -> dict[str, Any]:
    """The settings as the JSON mapping `parse_settings` reads (runtimes as a list)."""
    document = settings.model_dump(mode="json")
    document["inference_runtimes"] = [dict(runtime) for runtime in document["inference_runtimes"]]
    return document
