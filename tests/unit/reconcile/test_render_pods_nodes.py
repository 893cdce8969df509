"""Serving pods: node selection and tolerations from gco.reconcile.nodes, and the Prometheus scrape
annotations."""

from __future__ import annotations

from typing import Any

from gco.reconcile.nodes import CAPACITY_LABEL, GPU_TAINT, GPU_TYPE_LABEL, capacity_labels, gpu_labels
from gco.reconcile.render import render
from tests.unit.reconcile.records import EAST, make_record


def pod_template(spec: dict[str, Any]) -> dict[str, Any]:
    deployment = next(o for o in render(make_record(spec), EAST) if o["kind"] == "Deployment")
    template: dict[str, Any] = deployment["spec"]["template"]
    return template


def test_gpu_type_selects_the_node_group_model_label_in_any_case() -> None:
    for spelling in ("L40S", "l40s", "L40s"):
        selector = pod_template({"gpu_count": 1, "gpu_type": spelling})["spec"]["nodeSelector"]
        assert selector[GPU_TYPE_LABEL] == "l40s"
        assert selector[GPU_TYPE_LABEL] == gpu_labels("l40s")[GPU_TYPE_LABEL]
        assert "k8s.amazonaws.com/accelerator" not in selector


def test_gpu_pods_tolerate_the_gpu_taint_and_select_capacity() -> None:
    spec = pod_template({"gpu_count": 1, "capacity_type": "spot"})["spec"]
    assert GPU_TAINT.toleration() in spec["tolerations"]
    assert spec["nodeSelector"] == {CAPACITY_LABEL: "spot"} == capacity_labels("spot")
    assert pod_template({"gpu_count": 1})["spec"]["nodeSelector"] == {CAPACITY_LABEL: "on-demand"}
    assert GPU_TYPE_LABEL not in pod_template({"gpu_count": 0, "gpu_type": "l4"})["spec"]["nodeSelector"]


def test_serving_pods_are_scraped_on_their_port() -> None:
    annotations = pod_template({"port": 8080})["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8080",
        "prometheus.io/path": "/metrics",
    }
