"""The node-pool definition and the add-on names shared by the stack and the reconciler."""

from __future__ import annotations

import pytest

from gco.reconcile import addons, nodes


def test_gpu_type_by_instance_family() -> None:
    assert nodes.gpu_type("g6e.12xlarge") == "l40s"
    assert nodes.gpu_type("p5en.48xlarge") == "h200"
    assert nodes.gpu_type("p6-b200.48xlarge") == "b200"
    with pytest.raises(ValueError, match=r"'c7i\.large' is not an x86_64 NVIDIA GPU instance type"):
        nodes.gpu_type("c7i.large")


def test_labels_selectors_and_tolerations_come_from_one_definition() -> None:
    labels = nodes.gpu_labels("l40s")
    selector = nodes.gpu_type_selector("L40S")
    assert selector.items() <= labels.items()
    assert nodes.GPU_TAINT.toleration() == {
        "key": "nvidia.com/gpu",
        "operator": "Exists",
        "effect": "NoSchedule",
    }
    assert nodes.system_labels() == {nodes.POOL_LABEL: "system"}
    assert nodes.ACCELERATOR_TAINTS["neuron"].key == "aws.amazon.com/neuron"


def test_addons_env_round_trip_and_what_is_missing() -> None:
    value = addons.addons_value([addons.KEDA, addons.METRICS_SERVER, addons.KEDA])
    assert value == "keda,metrics-server"
    present = addons.addons_from_env({addons.ADDONS_ENV: value})
    assert present == frozenset({"keda", "metrics-server"})
    assert addons.missing_addons(["cpu", "gpu", "queue_depth"], present) == ["prometheus", "dcgm-exporter"]
    assert addons.missing_addons(["cpu"], present) == []
    assert addons.addons_from_env({}) is None
    assert addons.missing_addons(["gpu"], None) == []
    assert addons.addons_from_env({addons.ADDONS_ENV: ""}) == frozenset()


def test_capacity_label_and_the_autoscaler_node_template_tags() -> None:
    assert nodes.capacity_labels("spot") == {"gco.io/capacity-type": "spot"}
    with pytest.raises(ValueError, match=r"capacity kind 'both' is not one of on-demand, spot"):
        nodes.capacity_labels("both")
    labels = {**nodes.gpu_labels("l4"), **nodes.capacity_labels("on-demand")}
    tags = nodes.autoscaler_tags(labels, [nodes.GPU_TAINT])
    assert tags["k8s.io/cluster-autoscaler/node-template/label/gco.io/capacity-type"] == "on-demand"
    assert tags["k8s.io/cluster-autoscaler/node-template/label/gco.io/gpu-type"] == "l4"
    assert tags["k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu"] == "true:NoSchedule"
    assert len(tags) == 5
