"""The cluster's managed node groups: one system group, and one GPU group per GPU model.

Labels and taints come from `gco.reconcile.nodes`, the definition the renderer also reads, so a pod asking for
`gpu_type: L40S` selects the label of the group that holds the L40S instance types and tolerates its
taint. Each GPU group starts at the configured sizes (0 by default) and the Cluster Autoscaler
(`stacks/constructs/cluster_addons.py`) scales it from zero when a GPU pod is pending: with a group at zero
nodes it reads the group's labels and taints from EKS (DescribeNodegroup) and the GPU count from
the instance type, which is why every instance type of a group carries the same GPU model.

Every group also carries gco's capacity label (`gco.reconcile.nodes.capacity_labels`:
`gco.io/capacity-type`, which the pods select) and publishes its labels and taint as the Cluster
Autoscaler's node-template tags on the node group (`gco.reconcile.nodes.autoscaler_tags`). EKS does not
copy a managed node group's tags to its Auto Scaling group
(github.com/aws/containers-roadmap/issues/608), so the autoscaler reads the labels of a group at zero
through `DescribeNodegroup` (the group's own labels, which hold the capacity label); the tags state the
same template on the node group for whoever copies them to the group.

Several instance types of one model (g6e.xlarge, g6e.2xlarge) make one group that EC2 can fill from
whichever type has capacity. With `capacity_type: both` each model gets a Spot and an On-Demand
group (`...-gpu-l40s-spot-nvme`, `...-gpu-l40s-on-demand-nvme`; a p3 group ends in `-ebs`); the
Cluster Autoscaler's priority expander (`priority_expander`) scales the `capacity_priority` kind first
and falls to the other when it cannot (no Spot capacity: the scale-up times out and the group is
backed off).
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from gco.deployment.capacity import capacity_kinds, gpu_models
from gco.reconcile.nodes import GPU_TAINT, autoscaler_tags, capacity_labels, gpu_labels, system_labels
from stacks.config import NodeGroupConfig
from stacks.constructs.node_storage import gpu_launch_template, uses_instance_store

CAPACITY = {"on-demand": eks.CapacityType.ON_DEMAND, "spot": eks.CapacityType.SPOT}

EFFECTS = {
    "NoSchedule": eks.TaintEffect.NO_SCHEDULE,
    "PreferNoSchedule": eks.TaintEffect.PREFER_NO_SCHEDULE,
    "NoExecute": eks.TaintEffect.NO_EXECUTE,
}


def group_id(model: str) -> str:
    """The construct id of a GPU model's node group (`l40s` -> `GpuL40sNodes`)."""
    return f"Gpu{model.replace('-', '').capitalize()}Nodes"


# A GPU group's name ends with where its pods' storage is: its instance store (`INSTANCE_STORE_SUFFIX`)
# or its EBS root volume (`ROOT_VOLUME_SUFFIX`). Either way its disk lives in a launch template
# (`_gpu_storage`), and moving a group's disk into one is a change that CloudFormation makes by
# replacement (AWS::EKS::Nodegroup: `DiskSize` and `LaunchTemplate`, "Update requires: Replacement"),
# which it refuses for a resource with a custom name ("CloudFormation cannot update a stack when a
# custom-named resource requires replacing"). A group's name so follows its storage: a deployment made
# with the node group's own disk updates to new groups under the new names (created first, the old
# ones then deleted), instead of failing. The instance store groups kept their names when the root
# volume groups got their template (and hop limit 1, stacks/constructs/node_storage.py).
INSTANCE_STORE_SUFFIX = "-nvme"
ROOT_VOLUME_SUFFIX = "-ebs"


def gpu_group_names(name: str, group: NodeGroupConfig) -> dict[tuple[str, str], str]:
    """Node group names by (GPU model, capacity kind): `{name}-gpu-{model}`, with the kind as a
    suffix when a model has two groups, then `INSTANCE_STORE_SUFFIX` when its pods' storage is the
    instance store, else `ROOT_VOLUME_SUFFIX`."""
    kinds = capacity_kinds(group)
    return {
        (model, kind): f"{name}-gpu-{model}"
        + (f"-{kind}" if len(kinds) > 1 else "")
        + (INSTANCE_STORE_SUFFIX if uses_instance_store(types) else ROOT_VOLUME_SUFFIX)
        for model, types in gpu_models(group.instance_types).items()
        for kind in kinds
    }


def priority_expander(name: str, group: NodeGroupConfig) -> dict[int, list[str]]:
    """The Cluster Autoscaler's priority expander table (higher first; each entry a regular
    expression over node group names): the preferred capacity kind's groups, then the other's, then
    any group (the system nodes). Its format: kubernetes/autoscaler,
    `cluster-autoscaler/expander/priority/readme.md`."""
    kinds = capacity_kinds(group)
    table: dict[int, list[str]] = {1: [".*"]}
    for rank, kind in enumerate(reversed(kinds), start=1):
        names = [n for (_, k), n in gpu_group_names(name, group).items() if k == kind]
        table[10 * rank] = [f".*{n}.*" for n in names]
    return table


def _sizes(group: NodeGroupConfig, instance_types: list[str], kind: str) -> dict[str, object]:
    return {
        "instance_types": [ec2.InstanceType(t) for t in instance_types],
        "min_size": group.min_size,
        "max_size": group.max_size,
        "desired_size": group.desired_size,
        "disk_size": group.disk_size_gib,
        "capacity_type": CAPACITY[kind],
    }


def _gpu_storage(
    scope: Construct, construct_id: str, group: NodeGroupConfig, instance_types: list[str], kind: str
) -> dict[str, object]:
    """The group's sizes with its launch template (`stacks/constructs/node_storage.py`), which holds
    its root volume and requires IMDSv2 with hop limit 1: the RAID0 of the instance store where every
    type has one (the root volume then `disk_size_gib`), else a root volume of `model_root_gib`, which
    holds the models (gco.reconcile.node_storage)."""
    sizes = _sizes(group, instance_types, kind)
    del sizes["disk_size"]
    disk = group.disk_size_gib if uses_instance_store(instance_types) else group.model_root_gib
    template = gpu_launch_template(scope, construct_id, instance_types=instance_types, disk_size_gib=disk)
    sizes["launch_template_spec"] = eks.LaunchTemplateSpec(
        id=template.ref, version=template.attr_latest_version_number
    )
    return sizes


def add_node_groups(
    cluster: eks.Cluster, *, name: str, gpu: NodeGroupConfig, system: NodeGroupConfig
) -> tuple[eks.Nodegroup, dict[str, eks.Nodegroup]]:
    """The system group and the GPU groups by node group name (`gpu_group_names`), labelled and tainted."""
    labels = {**system_labels(), **capacity_labels(system.capacity_type)}
    system_group = cluster.add_nodegroup_capacity(
        "SystemNodes",
        nodegroup_name=f"{name}-system",
        ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
        labels=labels,
        tags=autoscaler_tags(labels),
        **_sizes(system, system.instance_types, system.capacity_type),  # type: ignore[arg-type]
    )
    models = gpu_models(gpu.instance_types)
    ids = {
        group_name: group_id(model) + ("" if len(capacity_kinds(gpu)) == 1 else kind.title().replace("-", ""))
        for (model, kind), group_name in gpu_group_names(name, gpu).items()
    }
    gpu_groups = {
        group_name: cluster.add_nodegroup_capacity(
            ids[group_name],
            nodegroup_name=group_name,
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_NVIDIA,
            labels={**gpu_labels(model), **capacity_labels(kind)},
            tags=autoscaler_tags({**gpu_labels(model), **capacity_labels(kind)}, [GPU_TAINT]),
            taints=[
                eks.TaintSpec(effect=EFFECTS[GPU_TAINT.effect], key=GPU_TAINT.key, value=GPU_TAINT.value)
            ],
            **_gpu_storage(cluster, f"{ids[group_name]}Storage", gpu, models[model], kind),  # type: ignore[arg-type]
        )
        for (model, kind), group_name in gpu_group_names(name, gpu).items()
    }
    return system_group, gpu_groups
