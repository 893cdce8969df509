"""The node pools of a Regional cluster: their labels and taints, defined once.

The stack puts these labels and taints on the managed node groups (`stacks/gpu_nodes.py`) and the
renderer derives the pods' node selectors and tolerations from them (`gco/reconcile/render_pods.py`),
so a pod asking for a GPU type selects a label that some node group carries, and tolerates its taint.

GPU node groups are split by GPU model: every node of a group has the same `gco.io/gpu-type` value
(lowercase NVIDIA model names, as EKS Auto Mode and Karpenter spell them: `l40s`, `a10g`, `h100`).
`eks.amazonaws.com/capacityType` (ON_DEMAND | SPOT) is set by EKS itself on managed nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

POOL_LABEL = "gco.io/pool"
GPU_TYPE_LABEL = "gco.io/gpu-type"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
CAPACITY_LABEL = "eks.amazonaws.com/capacityType"
CAPACITY_VALUES = {"on-demand": "ON_DEMAND", "spot": "SPOT"}

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


def system_labels() -> dict[str, str]:
    """Labels of the system node group (controllers, add-ons, the shared proxy)."""
    return {POOL_LABEL: "system"}


def gpu_labels(model: str) -> dict[str, str]:
    """Labels of a GPU node group whose nodes all carry the GPU model `model`."""
    return {POOL_LABEL: "gpu", GPU_TYPE_LABEL: model, GPU_PRESENT_LABEL: "true"}


def gpu_type_selector(requested: str) -> dict[str, str]:
    """The node selector of a pod asking for the GPU model `requested` (any case: `L40S`, `l40s`)."""
    return {GPU_TYPE_LABEL: requested.lower()}
