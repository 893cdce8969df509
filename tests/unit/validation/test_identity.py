"""The identity (contract version 2): equal to the golden file, changed by any one input, diffed by path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gco.validation import CONTRACT_VERSION, first_difference, identity, parse_settings
from tests.unit.validation.sample import SETTINGS, settings, with_runtime

GOLDEN = Path(__file__).with_name("identity.golden.json")


def identity_of(data: dict[str, Any]) -> dict[str, Any]:
    return identity(parse_settings(data))


def test_identity_equals_the_golden_file() -> None:
    document = identity_of(SETTINGS)
    assert document == json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert document["contract_version"] == CONTRACT_VERSION == 2
    assert document["shared_proxy"] == {
        "namespace": "gco-system",
        "deployment": "inference-proxy",
        "hpa": "inference-proxy-hpa",
        "container": "api-tls-proxy",
        "cpu_request": "250m",
        "cpu_target": 70,
        "metric_type": "ContainerResource",
    }
    assert (
        document["accelerator"],
        document["rewrite_image"],
        document["roles"],
        document["hpa_metric"],
    ) == (
        "nvidia",
        False,
        ["baseline", "hpa"],
        "cpu",
    )


# One other valid value for every input; each must change the identity at exactly that path.
CHANGES: list[tuple[dict[str, Any], str]] = [
    (settings(selected_region="eu-west-1"), "selected_region"),
    (settings(request_prompt="Count to three."), "request_prompt"),
    (settings(request_max_tokens=9), "request_max_tokens"),
    # namespace: the reconciler's grant has one endpoint namespace, so no other value is valid.
    (settings(gpu_count=1), "gpu_count"),
    (settings(hpa_cpu_target=71), "hpa_cpu_target"),
    (settings(hpa_stability_intervals=3), "hpa_stability_intervals"),
    (settings(proxy_tls_cpu_request="500m"), "proxy_tls_cpu_request"),
    (settings(proxy_tls_cpu_target=80), "proxy_tls_cpu_target"),
    (settings(command_timeout_seconds=11), "command_timeout_seconds"),
    (settings(readiness_timeout_seconds=61), "readiness_timeout_seconds"),
    (settings(hpa_timeout_seconds=31), "hpa_timeout_seconds"),
    (settings(deletion_timeout_seconds=31), "deletion_timeout_seconds"),
    (settings(job_timeout_seconds=601), "job_timeout_seconds"),
    (settings(queue_timeout_seconds=61), "queue_timeout_seconds"),
    (settings(poll_interval_seconds=2), "poll_interval_seconds"),
    (settings(monitor_interval_seconds=2), "monitor_interval_seconds"),
    (settings(destroy_attempts=4), "destroy_attempts"),
    (settings(destroy_retry_delay_seconds=2), "destroy_retry_delay_seconds"),
    (with_runtime(0, image="vllm/vllm-openai@sha256:" + "3" * 64), "inference_runtimes[0].image"),
    (with_runtime(1, image="tgi@sha256:" + "4" * 64), "inference_runtimes[1].image"),
    (with_runtime(0, model_id="org/other"), "inference_runtimes[0].model_id"),
    (with_runtime(1, model_id="org/other"), "inference_runtimes[1].model_id"),
    (with_runtime(0, model_revision="c" * 40), "inference_runtimes[0].model_revision"),
    (with_runtime(1, model_revision="c" * 40), "inference_runtimes[1].model_revision"),
]


@pytest.mark.parametrize(("data", "path"), CHANGES, ids=[path for _, path in CHANGES])
def test_any_one_input_changes_the_identity_at_its_path(data: dict[str, Any], path: str) -> None:
    before, after = identity_of(SETTINGS), identity_of(data)
    assert before != after
    assert first_difference(before, after) == path


def test_the_fixed_inputs_are_in_the_identity_too() -> None:
    # Inputs with one valid value (counts, HPA bounds, health_path, consent) are still in it.
    document = identity_of(SETTINGS)
    for key in ("endpoint_count", "baseline_replicas", "autoscale_initial_replicas", "hpa_min_replicas"):
        assert key in document
    assert (document["hpa_max_replicas"], document["health_path"], document["consent"]) == (
        2,
        "/health",
        True,
    )


def test_first_difference_walks_in_order_and_names_shape_changes() -> None:
    assert first_difference({"a": 1, "b": [1, 2]}, {"a": 1, "b": [1, 2]}) is None
    assert first_difference({"a": 1, "b": 2}, {"a": 2, "b": 3}) == "a"
    assert first_difference({"a": [1, 2]}, {"a": [1]}) == "a[1]"
    assert first_difference({"a": {"x": 1}}, {"a": {"x": 1, "y": 2}}) == "a.y"
    assert first_difference({"a": 1}, {"a": True}) == "a"  # a bool is no int here either
    assert first_difference(1, 2) == "(identity)"
