"""The cluster's managed node groups: one system group, and one GPU group per GPU model.

Labels and taints come from `gco.nodes`, the definition the renderer also reads, so a pod asking for
`gpu_type: L40S` selects the label of the group that holds the L40S instance types and tolerates its
taint. Each GPU group starts at the configured sizes (0 by default) and the Cluster Autoscaler
(`stacks/cluster_addons.py`) scales it from zero when a GPU pod is pending: with a group at zero
nodes it reads the group's labels and taints from EKS (DescribeNodegroup) and the GPU count from
the instance type, which is why every instance type of a group carries the same GPU model.
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks

from gco.nodes import GPU_TAINT, gpu_labels, gpu_type, system_labels
from stacks.config import NodeGroupConfig

EFFECTS = {
    "NoSchedule": eks.TaintEffect.NO_SCHEDULE,
    "PreferNoSchedule": eks.TaintEffect.PREFER_NO_SCHEDULE,
    "NoExecute": eks.TaintEffect.NO_EXECUTE,
}


def gpu_models(instance_types: list[str]) -> dict[str, list[str]]:
    """Instance types grouped by GPU model, in first-seen order (`{"l40s": ["g6e.xlarge"]}`)."""
    groups: dict[str, list[str]] = {}
    for item in instance_types:
        groups.setdefault(gpu_type(item), []).append(item)
    return groups


def group_id(model: str) -> str:
    """The construct id of a GPU model's node group (`l40s` -> `GpuL40sNodes`)."""
    return f"Gpu{model.replace('-', '').capitalize()}Nodes"


def _sizes(group: NodeGroupConfig, instance_types: list[str]) -> dict[str, object]:
    return {
        "instance_types": [ec2.InstanceType(t) for t in instance_types],
        "min_size": group.min_size,
        "max_size": group.max_size,
        "desired_size": group.desired_size,
        "disk_size": group.disk_size_gib,
        "capacity_type": eks.CapacityType.SPOT
        if group.capacity_type == "spot"
        else eks.CapacityType.ON_DEMAND,
    }


def add_node_groups(
    cluster: eks.Cluster, *, name: str, gpu: NodeGroupConfig, system: NodeGroupConfig
) -> tuple[eks.Nodegroup, dict[str, eks.Nodegroup]]:
    """The system group and the GPU groups by model (`{name}-gpu-{model}`), labelled and tainted."""
    system_group = cluster.add_nodegroup_capacity(
        "SystemNodes",
        nodegroup_name=f"{name}-system",
        ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
        labels=system_labels(),
        **_sizes(system, system.instance_types),  # type: ignore[arg-type]
    )
    gpu_groups = {
        model: cluster.add_nodegroup_capacity(
            group_id(model),
            nodegroup_name=f"{name}-gpu-{model}",
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_NVIDIA,
            labels=gpu_labels(model),
            taints=[
                eks.TaintSpec(effect=EFFECTS[GPU_TAINT.effect], key=GPU_TAINT.key, value=GPU_TAINT.value)
            ],
            **_sizes(gpu, types),  # type: ignore[arg-type]
        )
        for model, types in gpu_models(gpu.instance_types).items()
    }
    return system_group, gpu_groups
