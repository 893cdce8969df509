"""What a deployment takes from an account's quotas, computed from the constants the stacks use.

The stacks reserve Lambda concurrency with these constants (`stacks/constructs/reconciler.py`,
`stacks/constructs/stream_lookup.py`), `gco doctor` compares the account's quota with the same
sums, and a test compares the synthesized templates and docs/deploy.md with them, so the figure a
deployer reads is the figure the templates need.

Lambda keeps at least 100 of an account's concurrency in a Region unreserved: a function's reserved
concurrency is refused when it would leave less ("Lambda requires at least 100 unreserved
concurrency", AWS Lambda Developer Guide, "Configuring reserved concurrency"). The Regional quota
("Concurrent executions", quota code L-B99A9384) must therefore be at least what a Region reserves
plus 100.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gco.reconcile.nodes import gpu_type
from gco.reconcile.throughput import STREAM_RESERVED_CONCURRENCY

if TYPE_CHECKING:
    from gco.deployment.config import GcoConfig, NodeGroupConfig

SWEEP_RESERVED_CONCURRENCY = 1
STREAM_LOOKUP_RESERVED_CONCURRENCY = 1
LAMBDA_UNRESERVED_MINIMUM = 100
LAMBDA_CONCURRENCY_QUOTA = ("lambda", "L-B99A9384")

# Functions with reserved concurrency in every Regional stack, by role (their names:
# `reserved_functions`).
REGIONAL_RESERVED = {
    "stream reconciler": STREAM_RESERVED_CONCURRENCY,
    "sweep": SWEEP_RESERVED_CONCURRENCY,
    "stream ARN lookup": STREAM_LOOKUP_RESERVED_CONCURRENCY,
}

# EC2 vCPU quotas by instance-family class and purchase option (Service Quotas, service code `ec2`).
VCPU_QUOTAS = {
    ("on-demand", "G and VT"): ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    ("on-demand", "P"): ("L-417A185B", "Running On-Demand P instances"),
    ("on-demand", "Standard"): (
        "L-1216C47A",
        "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
    ),
    ("spot", "G and VT"): ("L-3819A6DF", "All G and VT Spot Instance Requests"),
    ("spot", "P"): ("L-7212CCBC", "All P Spot Instance Requests"),
    ("spot", "Standard"): ("L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"),
}


def reserved_concurrency_per_region() -> int:
    """The concurrency each Regional stack reserves (every Region reserves the same)."""
    return sum(REGIONAL_RESERVED.values())


def reserved_functions(config: GcoConfig, region: str) -> dict[str, int]:
    """Each function a Regional stack reserves concurrency for, by its name (the stacks name them so;
    tests/cdk compares this with the synthesized templates)."""
    reconciler = config.name("reconciler", region)
    return {
        f"{reconciler}-stream": STREAM_RESERVED_CONCURRENCY,
        f"{reconciler}-sweep": SWEEP_RESERVED_CONCURRENCY,
        config.name("stream-arn", region): STREAM_LOOKUP_RESERVED_CONCURRENCY,
    }


def lambda_quota_needed() -> int:
    """The Regional Lambda concurrency quota a Region needs: its reservations + Lambda's 100."""
    return reserved_concurrency_per_region() + LAMBDA_UNRESERVED_MINIMUM


def quota_class(instance_type: str) -> str:
    """The vCPU quota class of an instance type: `G and VT`, `P` or `Standard`."""
    family = instance_type.split(".", 1)[0]
    if family.startswith(("g", "vt")):
        return "G and VT"
    if family.startswith("p"):
        return "P"
    return "Standard"


@dataclass(frozen=True)
class NodeGroupDemand:
    """One node group's claim on a vCPU quota: at most `max_size` nodes of its largest type."""

    instance_types: tuple[str, ...]
    max_size: int
    capacity: str  # "on-demand" | "spot"


def gpu_models(instance_types: list[str]) -> dict[str, list[str]]:
    """Instance types grouped by GPU model, in first-seen order (`{"l40s": ["g6e.xlarge"]}`): one
    node group per model (and capacity kind)."""
    groups: dict[str, list[str]] = {}
    for item in instance_types:
        groups.setdefault(gpu_type(item), []).append(item)
    return groups


def capacity_kinds(group: NodeGroupConfig) -> list[str]:
    """The capacity kinds a group is made in, the preferred first (`["spot", "on-demand"]`)."""
    if group.capacity_type != "both":
        return [group.capacity_type]
    other = "on-demand" if group.capacity_priority == "spot" else "spot"
    return [group.capacity_priority, other]


def node_group_demands(config: GcoConfig, region: str) -> list[NodeGroupDemand]:
    """Every group the Region's stacks make at its maximum: each GPU group (by model and capacity
    kind, as `stacks/constructs/gpu_nodes.py` makes them), the system group, and in the home Region
    the runner."""
    gpu = config.gpu_nodes
    demands = [
        NodeGroupDemand(tuple(types), gpu.max_size, kind)
        for types in gpu_models(gpu.instance_types).values()
        for kind in capacity_kinds(gpu)
    ]
    system = config.system_nodes
    demands.append(NodeGroupDemand(tuple(system.instance_types), system.max_size, system.capacity_type))
    if region == config.home_region:
        demands.append(NodeGroupDemand(tuple(config.runner.instance_types), 1, "on-demand"))
    return demands


def vcpu_demand(groups: Iterable[NodeGroupDemand], vcpus: dict[str, int]) -> dict[tuple[str, str], int]:
    """vCPUs needed per (capacity, quota class) when every group is at its maximum.

    A group of several instance types is counted at its largest (EC2 may fill it with any).
    `vcpus` maps each instance type to its vCPU count (EC2 DescribeInstanceTypes).

    Raises:
        KeyError: an instance type missing from `vcpus`.
    """
    needed: dict[tuple[str, str], int] = {}
    for group in groups:
        largest = max(vcpus[t] for t in group.instance_types)
        key = (group.capacity, quota_class(group.instance_types[0]))
        needed[key] = needed.get(key, 0) + largest * group.max_size
    return needed
