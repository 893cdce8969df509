"""The node pools of a Regional cluster: their labels and taints, defined once.

The stack puts these labels and taints on the managed node groups (`stacks/constructs/gpu_nodes.py`) and the
renderer derives the pods' node selectors and tolerations from them (`gco/reconcile/render_pods.py`),
so a pod asking for a GPU type selects a label that some node group carries, and tolerates its taint.

GPU node groups are split by GPU model: every node of a group has the same `gco.io/gpu-type` value
(lowercase NVIDIA model names, as EKS Auto Mode and Karpenter spell them: `l40s`, `a10g`, `h100`).
Every node group also carries gco's own capacity label, `gco.io/capacity-type` (`on-demand` | `spot`,
the spec's `capacity_type` values), and pods select it rather than `eks.amazonaws.com/capacityType`:
EKS sets that one on running managed nodes, but a group scaled to zero has no node, so the Cluster
Autoscaler would have to synthesize it from the group's capacity type to see that a pending pod fits.
A label gco puts on the group itself is among the labels the autoscaler reads for a group at zero
(EKS `DescribeNodegroup`, kubernetes/autoscaler `cluster-autoscaler/cloudprovider/aws/aws_manager.go`
`buildNodeFromTemplate`), and it is also published as the autoscaler's node-template tags
(`autoscaler_tags`): `k8s.io/cluster-autoscaler/node-template/label/<key>: <value>` and
`k8s.io/cluster-autoscaler/node-template/taint/<key>: <value>:<effect>`, the format of the Cluster
Autoscaler's AWS README ("Auto-Discovery Setup": scaling up from 0 nodes reads labels and taints from
these tags; github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/cloudprovider/aws/README.md).

The same instance types size the GPU pods: a container asking for `n` GPUs requests `n / gpus` of
the smallest matching instance type's vCPUs and memory, times `POD_SHARE_PERCENT` (`gpu_pod_requests`),
so a GPU pod is Burstable, never BestEffort (the kubelet evicts BestEffort pods first under node
pressure: kubernetes.io/docs/concepts/scheduling-eviction/node-pressure-eviction/), and one pod per
GPU still fits on the node beside the kubelet's reservation and the node's daemons.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

POOL_LABEL = "gco.io/pool"
GPU_TYPE_LABEL = "gco.io/gpu-type"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
CAPACITY_LABEL = "gco.io/capacity-type"  # values: the spec's capacity kinds, `on-demand` | `spot`
CAPACITY_KINDS = ("on-demand", "spot")
# The Cluster Autoscaler's node-template tag prefixes (module docstring).
TEMPLATE_LABEL_TAG = "k8s.io/cluster-autoscaler/node-template/label/"
TEMPLATE_TAINT_TAG = "k8s.io/cluster-autoscaler/node-template/taint/"

# NVIDIA GPU model by EC2 instance family (x86_64 families only: the GPU node groups run the
# AL2023 x86_64 NVIDIA AMI). https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html
GPU_BY_FAMILY = {
    "g4dn": "t4",
    "g5": "a10g",
    "g6": "l4",
    "gr6": "l4",
    "g6e": "l40s",
    "p3": "v100",
    "p3dn": "v100",
    "p4d": "a100",
    "p4de": "a100",
    "p5": "h100",
    "p5e": "h200",
    "p5en": "h200",
    "p6-b200": "b200",
}


@dataclass(frozen=True)
class InstanceSize:
    """What one EC2 instance type has: vCPUs, memory (MiB) and GPUs."""

    vcpus: int
    memory_mib: int
    gpus: int


def _sizes(family: str, rows: Iterable[tuple[str, int, int, int]]) -> dict[str, InstanceSize]:
    """`{family.size: InstanceSize}` from (size, vCPUs, memory GiB, GPUs) rows."""
    return {f"{family}.{size}": InstanceSize(vcpus, gib * 1024, gpus) for size, vcpus, gib, gpus in rows}


# vCPUs, memory (GiB) and GPUs of the GPU instance types, as the EC2 instance type specifications list
# them (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html, "Accelerated computing"). A GPU node
# group may only use a type listed here: its pods' CPU and memory requests are derived from it.
# The g4dn/g5/g6 sizes (g6e: the same with twice the memory).
_G = (
    ("xlarge", 4, 16, 1), ("2xlarge", 8, 32, 1), ("4xlarge", 16, 64, 1), ("8xlarge", 32, 128, 1),
    ("12xlarge", 48, 192, 4), ("16xlarge", 64, 256, 1), ("24xlarge", 96, 384, 4), ("48xlarge", 192, 768, 8),
)  # fmt: skip
INSTANCE_SIZES: dict[str, InstanceSize] = {
    **_sizes("g4dn", (*_G[:6], ("metal", 96, 384, 8))),
    **_sizes("g5", _G),
    **_sizes("g6", _G),
    **_sizes("gr6", (("4xlarge", 16, 128, 1), ("8xlarge", 32, 256, 1))),
    **_sizes("g6e", ((size, vcpus, gib * 2, gpus) for size, vcpus, gib, gpus in _G)),
    **_sizes("p3", (("2xlarge", 8, 61, 1), ("8xlarge", 32, 244, 4), ("16xlarge", 64, 488, 8))),
    **_sizes("p3dn", (("24xlarge", 96, 768, 8),)),
    **_sizes("p4d", (("24xlarge", 96, 1152, 8),)),
    **_sizes("p4de", (("24xlarge", 96, 1152, 8),)),
    **_sizes("p5", (("48xlarge", 192, 2048, 8),)),
    **_sizes("p5e", (("48xlarge", 192, 2048, 8),)),
    **_sizes("p5en", (("48xlarge", 192, 2048, 8),)),
    **_sizes("p6-b200", (("48xlarge", 192, 2048, 8),)),
}
# The share of a GPU's slice of the node (its vCPUs and memory divided by the GPUs) that a pod
# requests per GPU: the rest is left to the kubelet's reservation and eviction threshold (the EKS AMI
# reserves CPU on a sliding scale and about 0.25 GiB plus 11 MiB per pod of memory) and to the node's
# daemons (CNI, kube-proxy, Pod Identity agent, the NVIDIA device plugin, the DCGM exporter).
POD_SHARE_PERCENT = 80


@dataclass(frozen=True)
class Taint:
    """A node taint and the toleration that admits pods past it."""

    key: str
    value: str
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"

    def toleration(self) -> dict[str, str]:
        """`Exists` on the key and effect: admitted whatever the value."""
        return {"key": self.key, "operator": "Exists", "effect": self.effect}


# Only pods that ask for a GPU (and so tolerate this) land on GPU nodes.
GPU_TAINT = Taint(key="nvidia.com/gpu", value="true")
NEURON_TAINT = Taint(key="aws.amazon.com/neuron", value="true")
ACCELERATOR_TAINTS = {"nvidia": GPU_TAINT, "neuron": NEURON_TAINT}


def gpu_type(instance_type: str) -> str:
    """The GPU model of an EC2 instance type (`g6e.xlarge` -> `l40s`).

    Raises:
        ValueError: the family has no NVIDIA GPU this project knows.
    """
    family = instance_type.split(".", 1)[0]
    if family not in GPU_BY_FAMILY:
        known = ", ".join(sorted(GPU_BY_FAMILY))
        raise ValueError(f"{instance_type!r} is not an x86_64 NVIDIA GPU instance type (families: {known})")
    return GPU_BY_FAMILY[family]


def instance_size(instance_type: str) -> InstanceSize:
    """The vCPUs, memory and GPUs of a GPU instance type.

    Raises:
        ValueError: the type is not in `INSTANCE_SIZES` (the message lists the known ones of its family).
    """
    if instance_type not in INSTANCE_SIZES:
        family = instance_type.split(".", 1)[0]
        known = ", ".join(name for name in INSTANCE_SIZES if name.split(".", 1)[0] == family) or "none"
        raise ValueError(f"{instance_type!r} has no known size (of its family: {known})")
    return INSTANCE_SIZES[instance_type]


def gpu_pod_requests(instance_types: Iterable[str], gpus: int, model: str | None) -> dict[str, str]:
    """The CPU and memory a container asking for `gpus` GPUs (of `model`, or any) requests.

    Derived from the smallest share among the node groups' instance types that could hold the pod
    (that GPU model, at least `gpus` GPUs), so the pod fits whichever of them the autoscaler starts;
    `{}` when none could (the pod stays pending, as it would with any request).

    Raises:
        ValueError: an instance type that is not a known x86_64 NVIDIA GPU type and size.
    """
    fitting = [
        instance_size(item)
        for item in instance_types
        if instance_size(item).gpus >= gpus and (model is None or gpu_type(item) == model.lower())
    ]
    if gpus <= 0 or not fitting:
        return {}
    millicores = min(size.vcpus * 1000 * gpus * POD_SHARE_PERCENT // (100 * size.gpus) for size in fitting)
    mebibytes = min(size.memory_mib * gpus * POD_SHARE_PERCENT // (100 * size.gpus) for size in fitting)
    return {"cpu": f"{millicores}m", "memory": f"{mebibytes}Mi"}


def system_labels() -> dict[str, str]:
    """Labels of the system node group (controllers, add-ons, the shared proxy) that add-ons select."""
    return {POOL_LABEL: "system"}


def gpu_labels(model: str) -> dict[str, str]:
    """Labels of a GPU node group whose nodes all carry the GPU model `model`."""
    return {POOL_LABEL: "gpu", GPU_TYPE_LABEL: model, GPU_PRESENT_LABEL: "true"}


def capacity_labels(kind: str) -> dict[str, str]:
    """gco's capacity label of a node group of capacity `kind` (`on-demand` | `spot`).

    Raises:
        ValueError: `kind` is neither.
    """
    if kind not in CAPACITY_KINDS:
        raise ValueError(f"capacity kind {kind!r} is not one of {', '.join(CAPACITY_KINDS)}")
    return {CAPACITY_LABEL: kind}


def autoscaler_tags(labels: dict[str, str], taints: Iterable[Taint] = ()) -> dict[str, str]:
    """The Cluster Autoscaler's node-template tags of a node group with `labels` and `taints`."""
    tags = {TEMPLATE_LABEL_TAG + key: value for key, value in labels.items()}
    tags.update({TEMPLATE_TAINT_TAG + taint.key: f"{taint.value}:{taint.effect}" for taint in taints})
    return tags


def gpu_type_selector(requested: str) -> dict[str, str]:
    """The node selector of a pod asking for the GPU model `requested` (any case: `L40S`, `l40s`)."""
    return {GPU_TYPE_LABEL: requested.lower()}
