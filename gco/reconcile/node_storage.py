"""Where a model's weights live on a GPU node, and whether a model of a given size fits there.

The serving pod syncs its `model_source` into an `emptyDir` (and a Hub model is downloaded into the
container's writable layer); both are the pod's ephemeral storage, which the kubelet keeps on the
filesystem of its root directory (kubernetes.io/docs/concepts/storage/ephemeral-storage/,
kubernetes.io/docs/concepts/configuration/manage-resources-containers/#local-ephemeral-storage).
So a model fits a node when that filesystem holds it, and the mechanism is the node's:

- an instance type with NVMe instance store: its disks as one RAID0 array holding the kubelet's and
  containerd's directories, set by the GPU node groups' launch template (the EKS AL2023 AMI's
  `NodeConfig` `spec.instance.localStorage.strategy: RAID0`, awslabs.github.io/amazon-eks-ami/nodeadm/
  doc/api/#localstorageoptions), so ephemeral storage is the instance store's whole size;
- an instance type without (p3): the node's root volume, `gpu_nodes.model_disk_gib` in `cdk.json`
  (unset: `gpu_nodes.disk_size_gib`), which the reconciler is told as `GCO_GPU_DISK_GIB`.

A spec states its model's size (`model_size_gib`, or `gco inference deploy|update` reads it from the
`model_source`: gco.admission.model_size); the serving container then requests that much
ephemeral storage plus `HEADROOM_PERCENT` (so the scheduler places the pod only on a node with room,
and the kubelet evicts a pod that outgrows its request rather than letting it fill the node), and the
model's `emptyDir` is limited to it. The reconciler refuses, as a terminal status naming why, a size
that no GPU instance type of the Region could hold (`refusal`).

Instance store sizes, in GB (10^9 bytes), as EC2's DescribeInstanceTypes answers them:
`InstanceStorageInfo.Disks[]` (`Count` x `SizeInGB`) and `TotalSizeInGB`
(docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceStorageInfo.html; `aws ec2
describe-instance-types --instance-types p5.48xlarge --query 'InstanceTypes[].InstanceStorageInfo'`).
Each row was checked against those answers as moto 5.2.5 records them
(`moto/ec2/resources/instance_types.json.gz`, which `tests/unit/reconcile/test_node_storage.py` reads), which
corrected the P5 and P6 rows: 8 x 3800 GB (30,400), not 8 x 3840. moto records no P3 row: P3's three
sizes are "all VPC-only and EBS-only" (AWS News Blog, "New - Amazon EC2 Instances with Up to 8 NVIDIA
Tesla V100 GPUs (P3)", October 2017), so p3.2xlarge, p3.8xlarge and p3.16xlarge have none.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from gco.reconcile.nodes import INSTANCE_SIZES, gpu_type, instance_size

SIZE_FIELD = "model_size_gib"  # the spec field this module sizes storage from
HEADROOM_PERCENT = 10  # beyond the weights: tokenizer files, the sync's temporary files, logs
GIB_PER_GB = 10**9 / 2**30  # the table is in GB (10^9 bytes), Kubernetes quantities in GiB
# (size, disks, GB per disk) rows per family, as DescribeInstanceTypes lists them (module docstring).
_ROWS: dict[str, tuple[tuple[str, int, int], ...]] = {
    "g4dn": (
        ("xlarge", 1, 125), ("2xlarge", 1, 225), ("4xlarge", 1, 225), ("8xlarge", 1, 900),
        ("12xlarge", 1, 900), ("16xlarge", 1, 900), ("metal", 2, 900),
    ),
    "g5": (
        ("xlarge", 1, 250), ("2xlarge", 1, 450), ("4xlarge", 1, 600), ("8xlarge", 1, 900),
        ("12xlarge", 1, 3800), ("16xlarge", 1, 1900), ("24xlarge", 1, 3800), ("48xlarge", 2, 3800),
    ),
    "g6": (
        ("xlarge", 1, 250), ("2xlarge", 1, 450), ("4xlarge", 1, 600), ("8xlarge", 2, 450),
        ("12xlarge", 4, 940), ("16xlarge", 2, 940), ("24xlarge", 4, 940), ("48xlarge", 8, 940),
    ),
    "gr6": (("4xlarge", 1, 600), ("8xlarge", 2, 450)),
    "g6e": (
        ("xlarge", 1, 250), ("2xlarge", 1, 450), ("4xlarge", 1, 600), ("8xlarge", 2, 450),
        ("12xlarge", 2, 1900), ("16xlarge", 2, 950), ("24xlarge", 2, 1900), ("48xlarge", 4, 1900),
    ),
    "p3dn": (("24xlarge", 2, 900),),
    "p4d": (("24xlarge", 8, 1000),),
    "p4de": (("24xlarge", 8, 1000),),
    "p5": (("48xlarge", 8, 3800),),
    "p5e": (("48xlarge", 8, 3800),),
    "p5en": (("48xlarge", 8, 3800),),
    "p6-b200": (("48xlarge", 8, 3800),),
}  # fmt: skip
INSTANCE_STORE_DISKS: dict[str, tuple[int, int]] = {
    f"{family}.{size}": (count, gb) for family, rows in _ROWS.items() for size, count, gb in rows
}
INSTANCE_STORE_GB: dict[str, int] = {item: count * gb for item, (count, gb) in INSTANCE_STORE_DISKS.items()}


def instance_store_gib(instance_type: str) -> int:
    """The instance type's NVMe instance store in GiB, rounded down; 0 where it has none (p3)."""
    return math.floor(INSTANCE_STORE_GB.get(instance_type, 0) * GIB_PER_GB)


def node_storage_gib(instance_type: str, root_gib: int | None) -> int | None:
    """The ephemeral storage a node of `instance_type` offers pods: its instance store, else its root
    volume (`root_gib`, None where not known: then None)."""
    return instance_store_gib(instance_type) or root_gib


def model_volume_gib(model_size_gib: int) -> int:
    """The ephemeral storage a serving container requests for a model of `model_size_gib`."""
    return math.ceil(model_size_gib * (100 + HEADROOM_PERCENT) / 100)


def shortfall(
    model_size_gib: int,
    *,
    gpus: int,
    model: str | None,
    instance_types: Iterable[str],
    root_gib: int | None,
) -> str | None:
    """How a model of `model_size_gib` GiB falls short of every node that could run the pod (`gpus`
    GPUs of `model`, or any), as the words after its size; None where it fits one or the instance
    types are not known.

    Raises:
        ValueError: an instance type has no known size (`gco.reconcile.nodes.instance_size`).
    """
    candidates = [
        item
        for item in instance_types
        if instance_size(item).gpus >= gpus and (model is None or gpu_type(item) == model.lower())
    ]
    if not candidates:
        return None
    needed = model_volume_gib(model_size_gib)
    offered = {item: node_storage_gib(item, root_gib) for item in candidates}
    if any(size is None or size >= needed for size in offered.values()):
        return None
    listed = ", ".join(
        f"{item} {size} GiB {'instance store' if instance_store_gib(item) else 'root volume'}"
        for item, size in offered.items()
    )
    return (
        f"needs {needed} GiB of node storage (with {HEADROOM_PERCENT}% headroom), more than any GPU "
        f"node here offers ({listed})"
    )


def refusal(
    model_size_gib: int | None,
    *,
    gpus: int,
    model: str | None,
    instance_types: Iterable[str],
    root_gib: int | None,
) -> str | None:
    """Why a model of `model_size_gib` fits no node that could run the pod (`shortfall`, naming the
    field), or None (it fits one, no size is given, or the instance types are not known).

    Raises:
        ValueError: an instance type has no known size (`gco.reconcile.nodes.instance_size`).
    """
    if model_size_gib is None:
        return None
    reason = shortfall(
        model_size_gib, gpus=gpus, model=model, instance_types=instance_types, root_gib=root_gib
    )
    return None if reason is None else f"{SIZE_FIELD}: {model_size_gib} GiB {reason}"


# Every GPU instance type gco sizes pods for has an entry above or is known to have no instance store.
WITHOUT_INSTANCE_STORE = frozenset(item for item in INSTANCE_SIZES if item not in INSTANCE_STORE_GB)
