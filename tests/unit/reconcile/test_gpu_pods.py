"""GPU pods that are not evicted first (CPU and memory derived from the node groups' instance types) and
KEDA queries that match exactly one Deployment's pods."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gco.endpoints.errors import InvalidSpecError
from gco.reconcile.environment import ReconcilerEnvironment
from gco.reconcile.nodes import INSTANCE_SIZES, POD_SHARE_PERCENT, gpu_pod_requests, instance_size
from gco.reconcile.render import render
from gco.reconcile.render_scaling import pod_name_pattern
from gco.reconcile.settings import RenderSettings
from stacks.config import ConfigError, parse_config
from tests.unit.reconcile.records import EAST, make_record

# k8s.io/apimachinery `pkg/util/rand`: the characters of hashes and generated suffixes.
ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"


def pod_name(deployment: str, hash_: str, suffix: str = "x5z2k") -> str:
    """A pod's name as Kubernetes makes it: ReplicaSet `d-<hash>`, base `d-<hash>-` cut to 58, 5 more."""
    return f"{deployment}-{hash_}-"[:58] + suffix


def server(objects: list[dict[str, Any]], name: str = "llama") -> dict[str, Any]:
    deployment = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == name)
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


def test_a_gpu_pod_requests_its_share_of_the_smallest_instance_that_holds_it() -> None:
    assert instance_size("g6e.xlarge").vcpus == 4 and instance_size("g6e.xlarge").memory_mib == 32 * 1024
    assert gpu_pod_requests(["g6e.xlarge"], 1, None) == {"cpu": "3200m", "memory": "26214Mi"}
    # Two GPUs only fit the 4-GPU type: half of its 48 vCPUs and 384 GiB, times the share.
    assert gpu_pod_requests(["g6e.xlarge", "g6e.12xlarge"], 2, "L40S") == {
        "cpu": f"{48_000 * 2 * POD_SHARE_PERCENT // 400}m",
        "memory": f"{384 * 1024 * 2 * POD_SHARE_PERCENT // 400}Mi",
    }
    # Either of two types may be started for one GPU: the smaller share.
    assert gpu_pod_requests(["g6e.2xlarge", "g5.xlarge"], 1, None) == {"cpu": "3200m", "memory": "13107Mi"}
    assert gpu_pod_requests(["g6e.2xlarge", "g5.xlarge"], 1, "l40s") == {"cpu": "6400m", "memory": "52428Mi"}
    assert gpu_pod_requests(["g6e.xlarge"], 2, None) == {}  # fits no node: no made-up request
    assert gpu_pod_requests(["g5.xlarge"], 1, "h100") == {}


def test_every_known_size_leaves_room_on_its_node() -> None:
    for name, size in INSTANCE_SIZES.items():
        requests = gpu_pod_requests([name], size.gpus, None)
        assert int(requests["cpu"][:-1]) < size.vcpus * 1000, name
        assert int(requests["memory"][:-2]) < size.memory_mib, name


def test_an_unknown_size_is_refused_naming_its_family() -> None:
    with pytest.raises(ValueError, match=r"'g6e.3xlarge' has no known size \(of its family: g6e.xlarge"):
        instance_size("g6e.3xlarge")
    with pytest.raises(ConfigError, match=r"^gco.gpu_nodes: .g6e.3xlarge. has no known size"):
        parse_config(
            {
                "gpu_nodes": {
                    "instance_types": ["g6e.3xlarge"],
                    "min_size": 0,
                    "max_size": 1,
                    "desired_size": 0,
                }
            }
        )


def test_the_rendered_gpu_container_is_burstable_not_best_effort() -> None:
    settings = RenderSettings(gpu_instance_types=("g6e.xlarge",))
    resources = server(render(make_record(), EAST, settings))["resources"]
    assert resources == {
        "requests": {"cpu": "3200m", "memory": "26214Mi", "nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    # Without known instance types nothing is made up: only the GPU (as before).
    assert server(render(make_record(), EAST))["resources"]["requests"] == {"nvidia.com/gpu": "1"}


def test_the_spec_s_own_requests_and_limits_win() -> None:
    settings = RenderSettings(gpu_instance_types=("g6e.xlarge",))
    spec = {"resources": {"requests": {"cpu": "2"}, "limits": {"memory": "20Gi"}}}
    resources = server(render(make_record(spec), EAST, settings))["resources"]
    # cpu as asked; memory left to the limit (Kubernetes makes the request equal to it).
    assert resources["requests"] == {"cpu": "2", "nvidia.com/gpu": "1"}
    assert resources["limits"] == {"memory": "20Gi", "nvidia.com/gpu": "1"}


def test_the_environment_carries_the_instance_types() -> None:
    environment = ReconcilerEnvironment(
        cluster_name="c", region=EAST, gpu_instance_types=("g6e.xlarge", "g6e.12xlarge")
    )
    env = environment.to_env()
    assert env["GCO_GPU_INSTANCE_TYPES"] == "g6e.xlarge,g6e.12xlarge"
    assert ReconcilerEnvironment.from_env(env) == environment
    assert ReconcilerEnvironment.from_env({**env, "GCO_GPU_INSTANCE_TYPES": ""}).gpu_instance_types == ()
    with pytest.raises(InvalidSpecError, match="GCO_GPU_INSTANCE_TYPES"):
        ReconcilerEnvironment.from_env({**env, "GCO_GPU_INSTANCE_TYPES": "g6e.3xlarge"})


HASHES = ["b", "7d9f4", "5c8d7b9f4", "5c8d7b9f4z"]  # 1 to 10 characters, as ComputeHash makes them
NAMES = ["llama", "llama-2", "llama-canary", "a" * 40, "a" * 46, "a" * 47, "a" * 50, "a" * 55, "a" * 56]


@pytest.mark.parametrize("name", NAMES)
def test_the_pattern_matches_every_pod_of_its_deployment(name: str) -> None:
    pattern = re.compile(pod_name_pattern(name))
    for hash_ in HASHES:
        assert pattern.fullmatch(pod_name(name, hash_)), (name, hash_)
        assert len(pod_name(name, hash_)) <= 63


@pytest.mark.parametrize("name", NAMES)
def test_the_pattern_matches_no_pod_of_a_deployment_it_prefixes(name: str) -> None:
    """`d-.*` matched `d-2`'s pods; the pattern matches none of another Deployment's under 57 characters."""
    others = [f"{name}-{tail}" for tail in ("2", "canary", "bcd", "x5z2k", "prefill", "b" * 9)]
    pattern = re.compile(pod_name_pattern(name))
    for other in (o for o in others if len(o) < 57):
        for hash_ in HASHES:
            assert not pattern.fullmatch(pod_name(other, hash_)), (name, other, hash_)
    assert not re.compile(pod_name_pattern(f"{name}-2")).fullmatch(pod_name(name, "5c8d7b9f4"))


def test_where_the_cut_makes_two_names_alike() -> None:
    """The documented line: a 57-character name `d-<hash characters>` cut to 58 looks like `d`'s pods."""
    name = "a" * 50
    other = f"{name}-bcdfgh"  # 57 characters: its base is cut inside its own name
    assert re.fullmatch(pod_name_pattern(name), pod_name(other, "5c8d7b9f4"))


def test_keda_queries_name_only_their_deployment_s_pods() -> None:
    spec = {"autoscaling": {"enabled": True, "max_replicas": 3, "metrics": [{"type": "gpu", "target": 60}]}}
    scaled = next(o for o in render(make_record(spec), EAST) if o["kind"] == "ScaledObject")
    query = scaled["spec"]["triggers"][0]["metadata"]["query"]
    selected = re.search(r'pod=~"([^"]+)"', query)
    assert selected is not None and selected.group(1) == pod_name_pattern("llama")
    assert re.fullmatch(selected.group(1), pod_name("llama", "5c8d7b9f4"))
    assert not re.fullmatch(selected.group(1), pod_name("llama-2", "5c8d7b9f4"))
