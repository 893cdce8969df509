"""The endpoint spec: a strict pydantic model, exportable as JSON Schema.

Strict means a bool is not an int, a string is not a number, and unknown keys are refused;
`parse_spec` turns any validation failure into one `InvalidSpecError` naming the field.
"""

# No `from __future__ import annotations` in the modules of pydantic models: pydantic would compile and
# evaluate every string annotation when the models are defined, at each Lambda cold start.

import re
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gco import engines
from gco.endpoints import names
from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.paths import escape_reason
from gco.endpoints.residency import residency_allows

# Every pattern is matched with `fullmatch`: `$` alone would accept a trailing newline.
IMAGE_REFERENCE = re.compile(
    r"(?P<name>[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]{1,2}[a-z0-9]+)*)*)"
    r"(:(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(@(?P<digest>sha256:[0-9a-f]{64}))?"
)
QUANTITY = re.compile(
    r"[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?"
)
RESOURCE_NAME = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
# A Secrets Manager secret by name or by ARN (docs.aws.amazon.com/secretsmanager/latest/apireference/
# API_GetSecretValue.html: SecretId, a name of up to 512 of these characters, or the secret's ARN).
SECRET_NAME = r"[A-Za-z0-9/_+=.@-]{1,512}"  # noqa: S105 - a pattern, not a password
# Only a complete ARN: Secrets Manager appends a hyphen and six random characters to the name in every
# secret's ARN. The API accepts a partial ARN (without them) where it matches one secret, but an IAM
# policy naming that partial ARN as its resource matches no secret's ARN, so reads are denied
# (API_GetSecretValue.html, SecretId: "If you specify an ARN, we generally recommend that you specify
# a complete ARN"; userguide/reference_iam-permissions.html#iam-resources: the ARN's random suffix).
# A name ending in a hyphen and six characters makes a partial ARN look complete: the docs recommend
# against such names (userguide/troubleshoot.html#ARN_secretnamehyphen), and this check cannot tell.
SECRET_ARN_PREFIX = r"arn:aws[a-z-]*:secretsmanager:[a-z]{2}(?:-gov)?-[a-z]+-\d:\d{12}:secret:"  # noqa: S105 - a pattern
SECRET_ARN = SECRET_ARN_PREFIX + SECRET_NAME + r"-[A-Za-z0-9]{6}"
SECRET_ID = re.compile(f"(?:{SECRET_ARN})|{SECRET_NAME}")
PARTIAL_SECRET_ARN = re.compile(SECRET_ARN_PREFIX + SECRET_NAME)
S3_URI = re.compile(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?")
HTTP_PATH = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*")

# Size limits: each named in the error of a value past it, and together far below the 400 KB
# DynamoDB item (the store also measures the whole item before it writes).
MAX_ITEMS = 256
MAX_TEXT = 4096
MAX_KEY = 253
MAX_IMAGE = 512
Port = Annotated[int, Field(ge=1, le=65535)]
Replicas = Annotated[int, Field(ge=0, le=1000)]
NonEmpty = Annotated[str, Field(min_length=1, max_length=1024)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
Key = Annotated[str, Field(min_length=1, max_length=MAX_KEY)]
Image = Annotated[str, Field(max_length=MAX_IMAGE)]
HttpPath = Annotated[str, Field(max_length=1024)]


class FieldValueError(ValueError):
    """A model-level check's failure, tied to the field it is about (relative to the model)."""

    def __init__(self, field: str | tuple[str | int, ...], message: str) -> None:
        self.parts: tuple[str | int, ...] = tuple(field.split(".")) if isinstance(field, str) else field
        super().__init__(message)


def unsafe_location(value: Any) -> tuple[str | int, ...] | None:
    """Where in a (nested) value a string holds a control character; None when nowhere."""
    if isinstance(value, str):
        return () if names.first_unsafe(value) is not None else None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = unsafe_location(item)
            if found is not None:
                return (index, *found)
    if isinstance(value, dict):
        for key, item in value.items():
            if unsafe_location(key) is not None:
                return (str(key),)
            found = unsafe_location(item)
            if found is not None:
                return (str(key), *found)
    return None


# Every field of the spec's models that can hold text (a str, or a list or dict holding str), each
# checked for control and invisible characters by `_Strict`. Named rather than "*": a validator on
# every field also wraps each number, boolean, literal and nested model (values it can never refuse),
# and pydantic builds each wrapper (inspecting the validator) when the models are defined, at every
# Lambda cold start. tests/unit/endpoints/test_spec.py checks that no text field is left out.
TEXT_FIELDS = (
    *("image", "framework", "gpu_type", "model_id", "model_revision", "model_source", "health_check_path"),
    *("env", "command", "args", "extra_args", "node_selector"),
    *("requests", "limits", "key", "value", "store_global_segment_size", "store_local_buffer_size"),
    "proxy_image",
    *("secret_env", "secret_id", "json_key"),
    *("regions", "promoted_regions"),
)


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, validate_default=True)

    @field_validator(*TEXT_FIELDS, mode="after", check_fields=False)
    @classmethod
    def _no_control_characters(cls, value: Any) -> Any:
        found = unsafe_location(value)
        if found is not None:
            raise FieldValueError(found, "holds a control or invisible character")
        return value


def _image(value: str) -> str:
    if not IMAGE_REFERENCE.fullmatch(value):
        raise ValueError(f"{value!r} is not a container image reference (name[:tag][@sha256:<64 hex>])")
    return value


def _quantity(value: str) -> str:
    if not QUANTITY.fullmatch(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (for example 500m, 4Gi, 2)")
    return value


class ResourceRequirements(_Strict):
    """Container requests and limits; GPU resources are added from gpu_count, not here."""

    requests: dict[Key, Annotated[str, Field(max_length=64)]] = Field(default_factory=dict, max_length=32)
    limits: dict[Key, Annotated[str, Field(max_length=64)]] = Field(default_factory=dict, max_length=32)

    @field_validator("requests", "limits")
    @classmethod
    def _check(cls, value: dict[str, str]) -> dict[str, str]:
        for key, quantity in value.items():
            if not RESOURCE_NAME.fullmatch(key):
                raise ValueError(f"{key!r} is not a resource name")
            _quantity(quantity)
        return value


class Toleration(_Strict):
    key: Key | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: Annotated[str, Field(max_length=63)] | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.operator == "Exists" and self.value:
            raise FieldValueError("value", "must be empty when operator is Exists")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise FieldValueError("toleration_seconds", "applies only to effect NoExecute")
        return self


class SecretEnvRef(_Strict):
    """An environment variable's value from AWS Secrets Manager: the secret (name or ARN) and, for a
    JSON secret, the key whose value is used (None: the whole SecretString). Only the reference is
    stored; the value reaches the pod through a Kubernetes Secret (gco.secrets.endpoint_secrets)."""

    secret_id: Annotated[str, Field(min_length=1, max_length=2048)]
    json_key: Annotated[str, Field(min_length=1, max_length=256)] | None = None

    @field_validator("secret_id")
    @classmethod
    def _secret_id(cls, value: str) -> str:
        return check_secret_id(value)


def check_secret_id(value: str) -> str:
    """`value` where it is a secret name or a complete secret ARN.

    Raises:
        ValueError: a partial ARN (no six-character suffix: named as such), or neither.
    """
    if SECRET_ID.fullmatch(value):
        return value
    if PARTIAL_SECRET_ARN.fullmatch(value):
        raise ValueError(
            f"{value!r} is a partial secret ARN (without the '-' and six random characters Secrets Manager "
            "appends): give the complete ARN, or the secret's name"
        )
    raise ValueError(f"{value!r} is not a Secrets Manager secret name or ARN")


MetricType = Literal["cpu", "memory", "gpu", "gpu_memory", "queue_depth"]
PERCENT_METRICS = frozenset({"cpu", "memory", "gpu", "gpu_memory"})
KEDA_METRICS = frozenset({"gpu", "gpu_memory", "queue_depth"})


class AutoscalingMetric(_Strict):
    """`target` is a utilization percent (1-100) or, for queue_depth, waiting requests per replica."""

    type: MetricType
    target: Annotated[float, Field(gt=0)]

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.type in PERCENT_METRICS and not 1 <= self.target <= 100:
            raise FieldValueError("target", f"a {self.type} target is a percent from 1 to 100")
        return self


class Autoscaling(_Strict):
    enabled: bool = False
    min_replicas: Annotated[int, Field(ge=0, le=1000)] = 1
    max_replicas: Annotated[int, Field(ge=1, le=1000)] = 1
    metrics: list[AutoscalingMetric] = Field(default_factory=list, max_length=8)

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.min_replicas > self.max_replicas:
            raise FieldValueError("min_replicas", "must not exceed max_replicas")
        kinds = [metric.type for metric in self.metrics]
        if len(set(kinds)) != len(kinds):
            raise FieldValueError("metrics", "each metric type may appear once")
        if self.enabled and not self.metrics:
            raise FieldValueError("metrics", "must name at least one metric when enabled")
        # A HorizontalPodAutoscaler cannot scale to zero; only KEDA-driven metrics can.
        if self.enabled and self.min_replicas == 0 and not set(kinds) <= KEDA_METRICS:
            raise FieldValueError(
                "min_replicas", "0 needs only gpu, gpu_memory or queue_depth metrics (KEDA)"
            )
        return self


class Canary(_Strict):
    """A second version taking `weight`% of requests; where `regions` names Regions, only there (the
    others serve the spec's version alone), and in `promoted_regions` (a subset) every request."""

    image: Image
    weight: Annotated[int, Field(ge=0, le=100)] = 10
    replicas: Annotated[int, Field(ge=1, le=1000)] = 1
    regions: list[str] | None = None  # None: every target Region
    promoted_regions: list[str] | None = None  # None: none (so a plain canary's JSON is as it was)

    @field_validator("image")
    @classmethod
    def _check_image(cls, value: str) -> str:
        return _image(value)

    @field_validator("regions", "promoted_regions")
    @classmethod
    def _check_regions(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        try:  # syntax only: the record's target Regions were checked against the partitions when set
            return names.region_list(value, "regions", allow_empty=True, allow_new=True)
        except InvalidSpecError as error:
            raise ValueError(error.message) from None

    @model_validator(mode="after")
    def _promoted_within(self) -> Self:
        promoted = self.promoted_regions or []
        outside = [r for r in promoted if self.regions is not None and r not in self.regions]
        if outside:
            raise FieldValueError("promoted_regions", f"{outside[0]} is not one of the canary's regions")
        return self

    def runs_in(self, region: str) -> bool:
        """Whether the canary runs in `region` (a target Region of its endpoint)."""
        return self.regions is None or region in self.regions

    def weight_in(self, region: str) -> int:
        """The canary's share of requests in `region`: every request where it was promoted."""
        return 100 if region in (self.promoted_regions or ()) else self.weight


class MooncakeRoleAutoscaling(_Strict):
    prefill: Autoscaling | None = None
    decode: Autoscaling | None = None


class Mooncake(_Strict):
    """Mooncake disaggregated serving: prefill/decode roles and/or the distributed KV store."""

    mode: Literal["disaggregated", "store", "both"] = "disaggregated"
    prefill_replicas: Annotated[int, Field(ge=1, le=1000)] = 1
    decode_replicas: Annotated[int, Field(ge=1, le=1000)] = 1
    transfer_protocol: Literal["rdma", "tcp"] = "tcp"
    store_global_segment_size: Annotated[str, Field(max_length=64)] = "4Gi"
    store_local_buffer_size: Annotated[str, Field(max_length=64)] = "1Gi"
    proxy_image: Image | None = None
    autoscaling: MooncakeRoleAutoscaling | None = None

    @field_validator("store_global_segment_size", "store_local_buffer_size")
    @classmethod
    def _size(cls, value: str) -> str:
        return _quantity(value)

    @field_validator("proxy_image")
    @classmethod
    def _proxy_image(cls, value: str | None) -> str | None:
        return None if value is None else _image(value)

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.mode in ("disaggregated", "both") and self.proxy_image is None:
            raise FieldValueError("proxy_image", "is required for disaggregated serving")
        return self


class Residency(_Strict):
    """Data residency: the endpoint's requests are served only from these Regions.

    `regions` empty means the endpoint's target Regions; named Regions must be among the targets
    (`check_residency`, checked wherever the spec or the targets are written). The global way in
    (`gco.global_access.routing`) never sends a resident endpoint's request anywhere else, even while
    every allowed Region fails: the caller gets a 503 naming why.
    """

    enabled: bool = False
    regions: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(
        default_factory=list, max_length=names.MAX_REGIONS
    )

    @field_validator("regions")
    @classmethod
    def _regions(cls, value: list[str]) -> list[str]:
        for index, region in enumerate(value):
            try:
                names.region(region, f"regions[{index}]", allow_new=True)
            except InvalidSpecError as error:
                raise FieldValueError((index,), error.message) from None
        if len(set(value)) != len(value):
            raise ValueError("names a Region twice")
        return value

    def allowed(self, targets: list[str]) -> list[str]:
        """The Regions that may serve: the named ones, else every target (all targets when off)."""
        return residency_allows(self.enabled, self.regions, targets)


def check_residency(spec: "EndpointSpec", targets: list[str], prefix: str = "spec") -> None:
    """Refuse a residency that names a Region outside the target Regions.

    Raises:
        InvalidSpecError: `spec.residency.regions` names a Region that is not a target.
    """
    if spec.residency is None or not spec.residency.enabled:
        return
    outside = [region for region in spec.residency.regions if region not in targets]
    if outside:
        raise InvalidSpecError(
            f"{prefix}.residency.regions",
            f"{', '.join(outside)} not among the target Regions ({', '.join(targets) or 'none'})",
        )


def _choices(values: tuple[str, ...]) -> str:
    """`'a', 'b' or 'c'`, as pydantic words a Literal's allowed values."""
    quoted = [repr(value) for value in values]
    return " or ".join([", ".join(quoted[:-1]), quoted[-1]]) if len(quoted) > 1 else "".join(quoted)


def _framework_enum(schema: dict[str, Any]) -> None:
    """The schema's allowed frameworks: those registered when the schema is made."""
    schema["enum"] = list(engines.names())


class EndpointSpec(_Strict):
    """What to run for one endpoint; identical in every target Region."""

    image: Image
    require_digest: bool = False
    # One of the registered engine frameworks (`gco.engines`); the schema lists them as they are then.
    framework: Annotated[str, Field(json_schema_extra=_framework_enum)] = engines.DEFAULT
    port: Port = 8000
    replicas: Replicas = 1
    gpu_count: Annotated[int, Field(ge=0, le=64)] = 1
    gpu_type: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")] | None = None
    accelerator: Literal["nvidia", "neuron"] = "nvidia"
    capacity_type: Literal["on-demand", "spot"] = "on-demand"
    model_id: NonEmpty | None = None
    model_revision: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")] | None = None
    model_source: HttpPath | None = None
    # The model's size on disk: the serving pod asks that much node storage (plus headroom), and a
    # Region whose GPU nodes cannot hold it refuses the endpoint (gco.reconcile.node_storage).
    model_size_gib: Annotated[int, Field(ge=1, le=100_000)] | None = None
    health_check_path: HttpPath = "/health"
    env: dict[Key, Text] = Field(default_factory=dict, max_length=MAX_ITEMS)
    secret_env: dict[Key, SecretEnvRef] = Field(default_factory=dict, max_length=64)
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    command: Annotated[list[Text], Field(max_length=MAX_ITEMS)] | None = None
    args: Annotated[list[Text], Field(max_length=MAX_ITEMS)] | None = None
    extra_args: list[Text] = Field(default_factory=list, max_length=MAX_ITEMS)
    tolerations: list[Toleration] = Field(default_factory=list, max_length=64)
    node_selector: dict[Key, Annotated[str, Field(max_length=63)]] = Field(
        default_factory=dict, max_length=64
    )
    autoscaling: Autoscaling = Field(default_factory=Autoscaling)
    canary: Canary | None = None
    mooncake: Mooncake | None = None
    residency: Residency | None = None  # None: served from any target Region

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        return _image(value)

    @field_validator("framework", mode="before")
    @classmethod
    def _framework(cls, value: Any) -> Any:
        if value not in engines.names():
            raise ValueError(f"Input should be {_choices(engines.names())}")
        return value

    @field_validator("model_id")
    @classmethod
    def _trimmed(cls, value: str | None) -> str | None:
        if value is not None and value != value.strip():
            raise ValueError("must not start or end with whitespace")
        return value

    @field_validator("model_source")
    @classmethod
    def _model_source(cls, value: str | None) -> str | None:
        if value is not None and not S3_URI.fullmatch(value):
            raise ValueError(f"{value!r} is not an s3://bucket/prefix URI")
        return value

    @field_validator("health_check_path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not HTTP_PATH.fullmatch(value):
            raise ValueError(f"{value!r} is not an absolute HTTP path")
        # The kubelet's probe sends the path as written and the engine resolves it: a dot segment or
        # an encoded separator probes another path than it reads (the proxy's rule, `paths`).
        reason = escape_reason(value)
        if reason is not None:
            raise ValueError(f"{value[:80]!r} {reason}")
        return value

    @field_validator("env", "secret_env")
    @classmethod
    def _env(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if not ENV_NAME.fullmatch(key):
                raise ValueError(f"{key!r} is not an environment variable name")
        return value

    @field_validator("node_selector")
    @classmethod
    def _node_selector(cls, value: dict[str, str]) -> dict[str, str]:
        for key, label in value.items():
            try:
                names.label_key(key)
                names.label_value(label)
            except InvalidSpecError as error:
                raise ValueError(error.message) from None
        return value

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.mooncake is not None and self.canary is not None:
            raise FieldValueError("canary", "cannot be used together with mooncake")
        if self.require_digest:
            for field, image in self.images().items():
                if "@sha256:" not in image:
                    raise FieldValueError(
                        field, "must be pinned by digest (@sha256:...) when require_digest is set"
                    )
        if self.accelerator == "neuron" and self.gpu_type is not None:
            raise FieldValueError("gpu_type", "applies only to accelerator nvidia")
        for name in self.secret_env:
            if name in self.env:
                raise FieldValueError(("secret_env", name), "is also set in env: name it in one of them")
        return self

    def images(self) -> dict[str, str]:
        """Every image the spec runs, by field path."""
        found = {"image": self.image}
        if self.canary is not None:
            found["canary.image"] = self.canary.image
        if self.mooncake is not None and self.mooncake.proxy_image is not None:
            found["mooncake.proxy_image"] = self.mooncake.proxy_image
        return found

    @property
    def autoscaled(self) -> bool:
        return self.autoscaling.enabled


def field_path(location: tuple[int | str, ...], prefix: str) -> str:
    """`('autoscaling', 'metrics', 0, 'target')` -> `spec.autoscaling.metrics[0].target`."""
    path = prefix
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part and (not part.isprintable() or "." in part or "[" in part):
            path += f"[{part!r}]"  # keep one line, and unambiguous, whatever the key holds
        elif part:
            path = f"{path}.{part}" if path else str(part)
    return path or "spec"


def invalid_spec_from(error: ValidationError, prefix: str = "spec") -> InvalidSpecError:
    """The first validation problem as one error naming its field; a count of the rest."""
    problems = error.errors(include_url=False)
    first = problems[0]
    location = tuple(part for part in first["loc"] if not str(part).startswith("function-"))
    message = str(first["msg"]).removeprefix("Value error, ")
    cause = first.get("ctx", {}).get("error")
    if isinstance(cause, FieldValueError):
        location = (*location, *cause.parts)
        message = str(cause)
    if first["type"] == "extra_forbidden":
        message = "unknown field"
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})"
    return InvalidSpecError(field_path(location, prefix), message)


def parse_spec(data: Any, prefix: str = "spec") -> EndpointSpec:
    """Validate a mapping as an `EndpointSpec`.

    Raises:
        InvalidSpecError: naming the first bad field, e.g. `spec.port`.
    """
    if isinstance(data, EndpointSpec):
        return data
    if not isinstance(data, dict):
        raise InvalidSpecError(prefix, "must be a mapping")
    try:
        return EndpointSpec.model_validate(data)
    except ValidationError as error:
        raise invalid_spec_from(error, prefix) from None


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema of `EndpointSpec`, as `gco inference schema` prints it."""
    schema = EndpointSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://gco.dev/schemas/endpoint-spec.json"
    return schema
