"""The typed deployment configuration: the `gco` context key of `cdk.json`.

`app.py` is the only CDK code that reads context (and hands the parsed model to the stacks, which
import it as `stacks.config`); `gco doctor` reads the same file with the same model, so the checks
before a deploy and the deploy agree on every number. A bad value fails with one line that names
the key (`ConfigError`). Nothing here imports CDK, so the model is unit-testable on its own.
"""

from __future__ import annotations

import ipaddress
import json
import re
from datetime import date
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gco.deployment.charts import CHART_RELEASES, installed_charts, unsupported
from gco.deployment.global_address import GlobalAddressConfig
from gco.deployment.kubernetes import (
    DEFAULT_KUBERNETES_VERSION,
    EKS_CALENDAR,
    autoscaler_tag,
    support_status,
    today_utc,
)
from gco.endpoints.admissions import Policy
from gco.env import DEFAULT_TABLE
from gco.errors import GcoInputError
from gco.reconcile.addons import SCALING_ADDONS
from gco.reconcile.model_sources import parse_prefixes
from gco.reconcile.node_storage import instance_store_gib
from gco.reconcile.nodes import gpu_type, instance_size
from gco.reconcile.proxy.proxy_settings import ProxySettings
from gco.secrets.endpoint_secrets import parse_allowed

REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
KMS_KEY_ARN = re.compile(r"arn:aws[a-z-]*:kms:[a-z]{2}(-gov)?-[a-z]+-\d:\d{12}:key/[0-9a-f-]{36}")
INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")
# Every resource of a deployment carries this tag (value: the prefix); the runner workflow's
# launch permissions are bounded by it.
DEPLOYMENT_TAG = "gco:deployment"
BUCKET_NAME_MAX = 63
# Each Region's VPC spans two Availability Zones (stacks/constructs/network.py).
ZONES_PER_VPC = 2


class ConfigError(GcoInputError):
    """A context value is invalid; the message is one line naming the key (`field: reason`)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeGroupConfig(_Model):
    """One managed node group's instance types, sizes and capacity.

    `capacity_type` `both` makes a Spot and an On-Demand group of each GPU model (same sizes each),
    and the Cluster Autoscaler's priority expander tries `capacity_priority` first, so a pending pod
    gets the other kind when the first has no capacity (stacks/constructs/gpu_nodes.py).

    `disk_size_gib` is each node's root volume. `model_disk_gib` (GPU nodes only) replaces it on the
    GPU groups whose instance types have no instance store (p3): there the root volume is where the
    pods' models live (gco.reconcile.node_storage), so it is sized for the largest model to serve, while the
    groups on instance store keep a small root volume. Unset: `disk_size_gib`.
    """

    instance_types: list[str] = Field(min_length=1)
    min_size: int = Field(ge=0, le=100)
    max_size: int = Field(ge=1, le=100)
    desired_size: int = Field(ge=0, le=100)
    capacity_type: Literal["on-demand", "spot", "both"] = "on-demand"
    capacity_priority: Literal["spot", "on-demand"] = "spot"
    disk_size_gib: int = Field(default=100, ge=20, le=16384)
    model_disk_gib: int | None = Field(default=None, ge=20, le=16384)  # gp3 holds up to 16 TiB

    @field_validator("instance_types")
    @classmethod
    def _instance_types(cls, value: list[str]) -> list[str]:
        for item in value:
            if not INSTANCE_TYPE.match(item):
                raise ValueError(f"{item!r} is not an EC2 instance type")
        return value

    @model_validator(mode="after")
    def _sizes(self) -> NodeGroupConfig:
        if not self.min_size <= self.desired_size <= self.max_size:
            raise ValueError("needs min_size <= desired_size <= max_size")
        return self

    @property
    def model_root_gib(self) -> int:
        """The root volume of a GPU node without instance store, which holds its pods' models."""
        return self.model_disk_gib if self.model_disk_gib is not None else self.disk_size_gib


ECR_IMAGE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com/"
    r"(?P<repository>[a-z0-9][a-z0-9._/-]*)@sha256:[0-9a-f]{64}$"
)


class RunnerConfig(_Model):
    """The GPU runner instance the state machine starts for benchmark jobs."""

    instance_type: str = "g6e.xlarge"
    # Tried after `instance_type`, each in every zone, when EC2 has no capacity for the ones before.
    fallback_instance_types: list[str] = Field(default_factory=list, max_length=3)
    volume_size_gib: int = Field(default=200, ge=30, le=16384)
    heartbeat_seconds: int = Field(default=300, ge=60, le=3600)
    # Launch to the runner being up (instance start, boot, image pull, job read) for a job that sets
    # no queue timeout of its own; a matrix job's settings.queue_timeout_seconds replaces it.
    boot_seconds: int = Field(default=1200, ge=120, le=7200)
    timeout_hours: int = Field(default=12, ge=1, le=72)
    # The Secrets Manager secret (name, in the home Region) holding the engines' model token, and the
    # key when it is a JSON secret: the runner reads it into HF_TOKEN (gpu_runner/model_token.py).
    model_token_secret: str | None = Field(default=None, pattern=r"^[A-Za-z0-9/_+=.@-]{1,512}$")
    model_token_key: str | None = Field(default=None, min_length=1, max_length=256)
    # A prebuilt runner image in ECR, pinned by digest: the runner stack then builds nothing, so a
    # deploy needs no local Docker (build and push `gpu_runner/Dockerfile` for linux/amd64 yourself).
    image_uri: str | None = Field(default=None, pattern=ECR_IMAGE.pattern)

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, value: str) -> str:
        if not INSTANCE_TYPE.match(value):
            raise ValueError(f"{value!r} is not an EC2 instance type")
        return value

    @field_validator("fallback_instance_types")
    @classmethod
    def _fallbacks(cls, value: list[str]) -> list[str]:
        for item in value:
            if not INSTANCE_TYPE.match(item):
                raise ValueError(f"{item!r} is not an EC2 instance type")
        return value

    @property
    def instance_types(self) -> list[str]:
        """Every type the runner may launch as, in the order tried (no repeats)."""
        return list(dict.fromkeys([self.instance_type, *self.fallback_instance_types]))


PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]{1,512}$")


class OperatorsConfig(_Model):
    """The people who inspect and repair the clusters, and how they reach each cluster's API.

    `admin_principal_arns` get an EKS access entry with the cluster-admin access policy, and
    `viewer_principal_arns` one with the view policy, in every Region. The API endpoint stays private
    (reached from `private_cidrs`: a VPN, a peered network, or this VPC for CloudShell) unless
    `api_endpoint` is `public_and_private`, which opens it to `public_cidrs` only.
    """

    admin_principal_arns: list[str] = Field(default_factory=list)
    viewer_principal_arns: list[str] = Field(default_factory=list)
    api_endpoint: Literal["private", "public_and_private"] = "private"
    public_cidrs: list[str] = Field(default_factory=list)
    private_cidrs: list[str] = Field(default_factory=list)

    @field_validator("admin_principal_arns", "viewer_principal_arns")
    @classmethod
    def _principals(cls, value: list[str]) -> list[str]:
        for item in value:
            if not PRINCIPAL_ARN.match(item):
                raise ValueError(f"{item!r} is not an IAM role or user ARN")
        if len(set(value)) != len(value):
            raise ValueError("lists a principal twice")
        return value

    @field_validator("public_cidrs", "private_cidrs")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        for item in value:
            try:
                network = ipaddress.IPv4Network(item, strict=True)
            except ValueError:
                raise ValueError(f"{item!r} is not an IPv4 network (a.b.c.d/n)") from None
            if network.prefixlen == 0:
                raise ValueError("must name networks, not every address (0.0.0.0/0)")
        return value

    @model_validator(mode="after")
    def _public_needs_cidrs(self) -> OperatorsConfig:
        if self.api_endpoint == "public_and_private" and not self.public_cidrs:
            raise ValueError("api_endpoint public_and_private needs public_cidrs (the allowed networks)")
        if self.api_endpoint == "private" and self.public_cidrs:
            raise ValueError("public_cidrs apply only with api_endpoint public_and_private")
        return self


def _ipv4_network(value: str, *, min_prefix: int, max_prefix: int) -> str:
    try:
        network = ipaddress.IPv4Network(value, strict=True)
    except ValueError:
        raise ValueError(f"{value!r} is not an IPv4 network (a.b.c.d/n)") from None
    if not min_prefix <= network.prefixlen <= max_prefix:
        raise ValueError(f"{value!r} must be a /{min_prefix} to /{max_prefix} network")
    return value


class NetworkConfig(_Model):
    """Each Region's VPC: its network, NAT gateways and VPC endpoints.

    A Region not in `vpc_cidrs` gets the /16 of `base_cidr` numbered by its place in `regions`, so
    the default Regions never overlap and can be peered or joined by a transit gateway. One NAT
    gateway serves both zones unless `nat_per_zone` (a zone's outage then leaves the other's egress
    up, at one more gateway's hourly price). `vpc_endpoints` keeps ECR, S3, STS, DynamoDB and
    CloudWatch Logs traffic inside the VPC (image pulls, the reconciler's calls) instead of the NAT.
    `load_balancer_subnet_mask` sizes the front door's load balancer subnets, one per zone, which
    hold only its internal ALB and VPC link, so the proxy's NetworkPolicy can admit exactly them
    (gco/reconcile/render_network.py); an ALB needs "at least a /27 bitmask" and 8 free addresses per
    subnet (Elastic Load Balancing, Application Load Balancers guide, "Subnets for your load balancer").
    """

    vpc_cidrs: dict[str, str] = Field(default_factory=dict)
    base_cidr: str = "10.64.0.0/12"
    nat_per_zone: bool = False
    vpc_endpoints: bool = True
    load_balancer_subnet_mask: int = Field(default=26, ge=20, le=27)
    # The two Availability Zones of a Region's VPC, by name (`us-east-1c`), where the default (what
    # CloudFormation's Fn::GetAZs answers at deploy) lacks a GPU type; `gco doctor` names the zones that
    # offer every one (gco/doctor/zones.py).
    availability_zones: dict[str, list[str]] = Field(default_factory=dict)

    @field_validator("availability_zones")
    @classmethod
    def _zones(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for region, zones in value.items():
            if len(zones) != ZONES_PER_VPC or len(set(zones)) != ZONES_PER_VPC:
                raise ValueError(f"{region}: name {ZONES_PER_VPC} different zones, not {zones}")
            for zone in zones:
                if not re.fullmatch(rf"{re.escape(region)}[a-z]", zone):
                    raise ValueError(f"{region}: {zone!r} is not an Availability Zone of {region}")
        return value

    @field_validator("vpc_cidrs")
    @classmethod
    def _cidrs(cls, value: dict[str, str]) -> dict[str, str]:
        for cidr in value.values():
            _ipv4_network(cidr, min_prefix=16, max_prefix=20)
        return value

    @field_validator("base_cidr")
    @classmethod
    def _base(cls, value: str) -> str:
        return _ipv4_network(value, min_prefix=8, max_prefix=16)


EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
TOPIC_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$")


class AlarmsConfig(_Model):
    """Where each Region's reconciler alarms go: email addresses (each confirms the subscription
    AWS mails it) and existing SNS topics (an on-call tool's, a chat integration's)."""

    emails: list[str] = Field(default_factory=list)
    topic_arns: list[str] = Field(default_factory=list)

    @field_validator("emails")
    @classmethod
    def _emails(cls, value: list[str]) -> list[str]:
        for item in value:
            if not EMAIL.match(item):
                raise ValueError(f"{item!r} is not an email address")
        return value

    @field_validator("topic_arns")
    @classmethod
    def _topics(cls, value: list[str]) -> list[str]:
        for item in value:
            if not TOPIC_ARN.match(item):
                raise ValueError(f"{item!r} is not an SNS topic ARN")
        return value


class GcoConfig(_Model):
    """Everything a deployment varies: Regions, node groups, Kubernetes version, retention, names."""

    prefix: str = Field(default="gco", pattern=r"^[a-z][a-z0-9-]{1,15}$")
    account: str | None = Field(default=None, pattern=r"^\d{12}$")
    home_region: str = "us-east-1"
    regions: list[str] = Field(default_factory=lambda: ["us-east-1"], min_length=1)
    table_name: str = Field(default=DEFAULT_TABLE, pattern=r"^[A-Za-z0-9_.-]{3,255}$")
    table_replicas: bool = True
    # A version past EKS standard support costs extended-support pricing per cluster hour: only
    # with this set (gco/deployment/kubernetes.py holds the calendar). Declared before the version,
    # whose validator reads it.
    allow_extended_support: bool = False
    kubernetes_version: str = Field(default=DEFAULT_KUBERNETES_VERSION, pattern=r"^1\.\d{2}$")
    gpu_nodes: NodeGroupConfig = NodeGroupConfig(
        instance_types=["g6e.xlarge"], min_size=0, max_size=4, desired_size=0
    )
    system_nodes: NodeGroupConfig = NodeGroupConfig(
        instance_types=["m7i.large"], min_size=2, max_size=4, desired_size=2, disk_size_gib=50
    )
    evidence_retention_days: int = Field(default=365, ge=1, le=3650)
    log_retention_days: Literal[30, 90, 180, 365, 731, 1827, 3653] = 365
    sweep_minutes: int = Field(default=5, ge=1, le=1440)
    network: NetworkConfig = NetworkConfig()
    alarms: AlarmsConfig = AlarmsConfig()
    runner: RunnerConfig = RunnerConfig()
    proxy: ProxySettings = ProxySettings()
    bundle_dependencies: bool = True
    operators: OperatorsConfig = OperatorsConfig()
    # Regions that get KEDA, Prometheus and the DCGM exporter (gpu, gpu_memory and queue_depth
    # autoscaling); None: every Region, []: none.
    keda_regions: list[str] | None = None
    # The S3 prefixes endpoint pods may read models from (`s3://bucket/` or `s3://bucket/path/`), and
    # the KMS keys (ARNs) those objects are encrypted with: their Pod Identity role's only reads
    # (gco.reconcile.model_sources, stacks/constructs/model_access.py).
    model_sources: list[str] = Field(default_factory=list)
    model_kms_keys: list[str] = Field(default_factory=list)
    # The Secrets Manager secrets endpoint specs may name in `secret_env` (a name, a `prefix/*`, or an
    # ARN; names in the home Region): the Regional reconcilers may read these only
    # (gco.secrets.endpoint_secrets).
    endpoint_secrets: list[str] = Field(default_factory=list)
    # What `gco inference deploy|update|canary|regions` do with an image that has no passing matrix
    # evidence in a target Region: nothing (off), warn on stderr (warn), refuse (enforce). The global
    # stack writes it to the SSM parameter the CLI reads (gco.admission.policy).
    validation_policy: Policy = "off"
    # The customer managed KMS keys (ARNs) those secrets are encrypted under: the reconcilers may
    # decrypt with them through Secrets Manager only (stacks/constructs/reconciler.py).
    endpoint_secret_kms_keys: list[str] = Field(default_factory=list)
    # Who sets API Gateway's CloudWatch Logs role, a setting of the account in each Region that the
    # front door's access logs need: `create` (each Regional stack creates the role and sets it),
    # `existing` (the account already has one; `gco doctor` checks it). gco.front_door says why.
    api_gateway_account: Literal["create", "existing"] = "create"
    # One DNS name for every caller (docs/global.md); None: no global resources.
    global_address: GlobalAddressConfig | None = None

    @field_validator("home_region")
    @classmethod
    def _home(cls, value: str) -> str:
        if not REGION.match(value):
            raise ValueError(f"{value!r} is not a Region name")
        return value

    @field_validator("regions")
    @classmethod
    def _regions(cls, value: list[str]) -> list[str]:
        for item in value:
            if not REGION.match(item):
                raise ValueError(f"{item!r} is not a Region name")
        if len(set(value)) != len(value):
            raise ValueError("lists a Region twice")
        return value

    @field_validator("model_sources")
    @classmethod
    def _model_sources(cls, value: list[str]) -> list[str]:
        parse_prefixes(value)  # a ValueError naming the malformed prefix
        return value

    @field_validator("endpoint_secrets")
    @classmethod
    def _endpoint_secrets(cls, value: list[str]) -> list[str]:
        parse_allowed(value)  # a ValueError naming the malformed entry
        return value

    @field_validator("model_kms_keys", "endpoint_secret_kms_keys")
    @classmethod
    def _model_keys(cls, value: list[str]) -> list[str]:
        for item in value:
            if not KMS_KEY_ARN.fullmatch(item):
                raise ValueError(f"{item!r} is not a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>)")
        return value

    @field_validator("gpu_nodes")
    @classmethod
    def _gpu_types(cls, value: NodeGroupConfig) -> NodeGroupConfig:
        for item in value.instance_types:
            gpu_type(item)  # a ValueError naming the type and the known families
            instance_size(item)  # its pods' CPU and memory are derived from its size
        if value.model_disk_gib is not None and all(instance_store_gib(t) for t in value.instance_types):
            # A size that sizes nothing: every group here keeps its models on the instance store.
            raise ValueError(
                "model_disk_gib sizes the root volume of instance types without instance store (p3); "
                f"every one of {', '.join(value.instance_types)} has instance store"
            )
        return value

    @field_validator("kubernetes_version")
    @classmethod
    def _kubernetes_version(cls, version: str, info: ValidationInfo) -> str:
        today = (info.context or {}).get("today") or today_utc()
        status = support_status(version, today)
        if status == "unknown":
            raise ValueError(f"{version!r} is not in the EKS calendar gco knows ({', '.join(EKS_CALENDAR)})")
        if status == "ended":
            raise ValueError(f"{version} is past EKS extended support: EKS refuses it")
        if status == "extended" and not info.data.get("allow_extended_support"):
            raise ValueError(
                f"{version} is out of EKS standard support since {EKS_CALENDAR[version].end_of_standard} "
                "(extended-support pricing): pick a newer version, or set allow_extended_support: true"
            )
        autoscaler_tag(version)  # a ValueError naming the versions with a pinned autoscaler
        return version

    @model_validator(mode="after")
    def _networks(self) -> GcoConfig:
        for key, named in (
            ("vpc_cidrs", self.network.vpc_cidrs),
            ("availability_zones", self.network.availability_zones),
        ):
            for region in named:
                if region not in self.regions:
                    raise ValueError(f"network.{key}: {region!r} is not one of regions")
        room = 2 ** (16 - ipaddress.IPv4Network(self.network.base_cidr).prefixlen)
        if len(self.regions) > room:
            raise ValueError(
                f"network.base_cidr {self.network.base_cidr} holds {room} /16 networks, not one per Region"
            )
        networks = [ipaddress.IPv4Network(self.vpc_cidr(r)) for r in self.regions]
        for i, first in enumerate(networks):
            for second in networks[i + 1 :]:
                if first.overlaps(second):
                    raise ValueError(
                        f"network.vpc_cidrs: {first} and {second} overlap (VPCs could not be peered)"
                    )
        if self.system_nodes.capacity_type == "both":
            raise ValueError("system_nodes.capacity_type both applies to GPU node groups only")
        if self.system_nodes.model_disk_gib is not None:
            raise ValueError("system_nodes.model_disk_gib applies to GPU node groups only")
        return self

    @model_validator(mode="after")
    def _bucket_names_fit(self) -> GcoConfig:
        # The longest bucket name the stacks make (S3 allows 63 characters): the evidence access-log
        # bucket, `<prefix>-evidence-logs-<account>-<home Region>-<8-character creation id>`.
        longest = len(self.name("evidence", "logs")) + len("-123456789012-") + len(self.home_region) + 9
        if longest > BUCKET_NAME_MAX:
            raise ValueError(
                f"prefix {self.prefix!r} makes bucket names of {longest} characters (S3 allows 63)"
            )
        return self

    @model_validator(mode="after")
    def _home_is_regional(self) -> GcoConfig:
        if self.home_region not in self.regions:
            raise ValueError(f"home_region {self.home_region!r} must also be one of regions")
        for region in self.keda_regions or []:
            if region not in self.regions:
                raise ValueError(f"keda_regions: {region!r} is not one of regions")
        return self

    @model_validator(mode="after")
    def _charts_support_the_version(self) -> GcoConfig:
        # Each chart a Region installs must document support for the cluster's version (the ranges
        # and their sources: gco/deployment/charts.py). KEDA's tested window is the narrowest.
        scaling = any(self.has_keda(region) for region in self.regions)
        for name in unsupported(self.kubernetes_version, installed_charts(scaling)):
            chart = CHART_RELEASES[name]
            hint = ", or keda_regions: [] (no KEDA)" if name in SCALING_ADDONS else ""
            raise ValueError(
                f"kubernetes_version: {self.kubernetes_version} is outside the Kubernetes versions "
                f"{chart.chart} {chart.version} documents ({chart.support_range}): pick a version it "
                f"lists{hint}"
            )
        return self

    @model_validator(mode="after")
    def _global_address_fits(self) -> GcoConfig:
        if self.proxy.forwarding is not None:
            raise ValueError("proxy.forwarding is set by the stacks from global_address, not in cdk.json")
        address = self.global_address
        if address is None:
            return self
        for region in address.region_order:
            if region not in self.regions:
                raise ValueError(f"global_address.region_order: {region!r} is not one of regions")
        # Each Region's authorizer reads its own Region's replica of the endpoint and keys tables.
        if not self.table_replicas and len(self.regions) > 1:
            raise ValueError("global_address needs table_replicas: true (each Region reads its own replica)")
        return self

    def has_keda(self, region: str) -> bool:
        """Whether `region` gets KEDA, Prometheus and the DCGM exporter."""
        return self.keda_regions is None or region in self.keda_regions

    @property
    def replica_regions(self) -> list[str]:
        """Regional Regions other than home: each holds a table replica when replicas are on."""
        return [r for r in self.regions if r != self.home_region] if self.table_replicas else []

    def vpc_cidr(self, region: str) -> str:
        """The Region's VPC network: from `network.vpc_cidrs`, else the base's block numbered by the
        Region's place in `regions` (10.64.0.0/16, 10.65.0.0/16, ...), so no two Regions overlap."""
        if region in self.network.vpc_cidrs:
            return self.network.vpc_cidrs[region]
        base = ipaddress.IPv4Network(self.network.base_cidr)
        return str(list(base.subnets(new_prefix=16))[self.regions.index(region)])

    def name(self, *parts: str) -> str:
        """A resource name under the prefix: `gco-evidence`, `gco-reconciler-us-west-2`."""
        return "-".join([self.prefix, *parts])


def with_overrides(raw: Any, context: dict[str, Any]) -> Any:
    """`raw` with every `gco.<key>` context value (from `cdk -c gco.<key>=<value>`) set on top.

    A value is read as JSON when it parses (`false`, `["us-east-1"]`), else kept as a string.
    """
    overrides = {key.removeprefix("gco."): value for key, value in context.items() if key.startswith("gco.")}
    if not overrides or not isinstance(raw, dict | None):
        return raw
    merged = dict(raw or {})
    for key, value in overrides.items():
        merged[key] = _json_or_text(value)
    return merged


def _json_or_text(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def parse_config(raw: Any, *, today: date | None = None) -> GcoConfig:
    """Validate the `gco` context value; `today` (UTC, default: now) decides Kubernetes support.

    Raises:
        ConfigError: one line, `gco.<key path>: <reason>`, for the first bad value.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("gco", "context value must be a JSON object")
    try:
        return GcoConfig.model_validate(raw, context={"today": today or today_utc()})
    except ValidationError as error:
        first = error.errors()[0]
        path = ".".join(str(part) for part in ("gco", *first["loc"]))
        message = first["msg"].removeprefix("Value error, ")
        raise ConfigError(path, message) from None
