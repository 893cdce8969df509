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
- an instance type without (p3): the node's root volume, `gpu_nodes.disk_size_gib` in `cdk.json`.

A spec states its model's size (`model_size_gib`); the serving container then requests that much
ephemeral storage plus `HEADROOM_PERCENT` (so the scheduler places the pod only on a node with room,
and the kubelet evicts a pod that outgrows its request rather than letting it fill the node), and the
model's `emptyDir` is limited to it. The reconciler refuses, as a terminal status naming why, a size
that no GPU instance type of the Region could hold (`refusal`).

Instance store sizes, in GB as the EC2 instance type specifications list them (docs.aws.amazon.com/
ec2/latest/instancetypes/ac.html, "Instance store specifications"; `aws ec2 describe-instance-types
--query 'InstanceTypes[].[InstanceType,InstanceStorageInfo.TotalSizeInGB]'` answers the same).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from gco.nodes import INSTANCE_SIZES, gpu_type, instance_size

SIZE_FIELD = "model_size_gib"  # the spec field this module sizes storage from
HEADROOM_PERCENT = 10  # beyond the weights: tokenizer files, the sync's temporary files, logs
GIB_PER_GB = 10**9 / 2**30  # the table is in GB (10^9 bytes), Kubernetes quantities in GiB
# (size, GB) rows per family; the g5, g6 and g6e sizes share their smaller sizes' disks.
_G_SMALL = (("xlarge", 250), ("2xlarge", 450), ("4xlarge", 600), ("8xlarge", 900))
_ROWS: dict[str, tuple[tuple[str, int], ...]] = {
    "g4dn": (
        ("xlarge", 125), ("2xlarge", 225), ("4xlarge", 225), ("8xlarge", 900), ("12xlarge", 900),
        ("16xlarge", 900), ("metal", 1800),
    ),
    "g5": (*_G_SMALL, ("12xlarge", 3800), ("16xlarge", 1900), ("24xlarge", 3800), ("48xlarge", 7600)),
    "g6": (*_G_SMALL, ("12xlarge", 3760), ("16xlarge", 1880), ("24xlarge", 3760), ("48xlarge", 7520)),
    "gr6": (("4xlarge", 600), ("8xlarge", 900)),
    "g6e": (*_G_SMALL, ("12xlarge", 3800), ("16xlarge", 1900), ("24xlarge", 3800), ("48xlarge", 7600)),
    "p3dn": (("24xlarge", 1800),),
    "p4d": (("24xlarge", 8000),),
    "p4de": (("24xlarge", 8000),),
    "p5": (("48xlarge", 30720),),
    "p5e": (("48xlarge", 30720),),
    "p5en": (("48xlarge", 30720),),
    "p6-b200": (("48xlarge", 30720),),
}  # fmt: skip
INSTANCE_STORE_GB: dict[str, int] = {
    f"{family}.{size}": gb for family, rows in _ROWS.items() for size, gb in rows
}


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
        ValueError: an instance type has no known size (`gco.nodes.instance_size`).
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
        ValueError: an instance type has no known size (`gco.nodes.instance_size`).
    """
    if model_size_gib is None:
        return None
    reason = shortfall(
        model_size_gib, gpus=gpus, model=model, instance_types=instance_types, root_gib=root_gib
    )
    return None if reason is None else f"{SIZE_FIELD}: {model_size_gib} GiB {reason}"


# Every GPU instance type gco sizes pods for has an entry above or is known to have no instance store.
WITHOUT_INSTANCE_STORE = frozenset(item for item in INSTANCE_SIZES if item not in INSTANCE_STORE_GB)
