"""Valid matrix settings, as a settings file holds them: short intervals, for the local stack."""

from __future__ import annotations

import copy
from typing import Any

VLLM_IMAGE = "vllm/vllm-openai@sha256:" + "1" * 64
TGI_IMAGE = "ghcr.io/huggingface/text-generation-inference@sha256:" + "2" * 64
VLLM_REVISION = "a" * 40
TGI_REVISION = "b" * 40

SETTINGS: dict[str, Any] = {
    "selected_region": "us-east-1",
    "inference_runtimes": [
        {
            "framework": "vllm",
            "image": VLLM_IMAGE,
            "model_id": "HuggingFaceTB/SmolLM2-135M",
            "model_revision": VLLM_REVISION,
            "port": 8000,
        },
        {
            "framework": "tgi",
            "image": TGI_IMAGE,
            "model_id": "HuggingFaceTB/SmolLM2-135M-Instruct",
            "model_revision": TGI_REVISION,
            "port": 8080,
        },
    ],
    "request_prompt": "Say hello.",
    "request_max_tokens": 8,
    "namespace": "gco-inference",
    "gpu_count": 0,
    "endpoint_count": 4,
    "baseline_replicas": 1,
    "autoscale_initial_replicas": 1,
    "hpa_min_replicas": 2,
    "hpa_max_replicas": 2,
    "hpa_cpu_target": 70,
    "hpa_stability_intervals": 2,
    "health_path": "/health",
    "proxy_tls_cpu_request": "250m",
    "proxy_tls_cpu_target": 70,
    "command_timeout_seconds": 10,
    "readiness_timeout_seconds": 60,
    "hpa_timeout_seconds": 30,
    "deletion_timeout_seconds": 30,
    "job_timeout_seconds": 600,
    "queue_timeout_seconds": 60,
    "poll_interval_seconds": 1,
    "monitor_interval_seconds": 1,
    "destroy_attempts": 3,
    "destroy_retry_delay_seconds": 1,
    "consent": True,
}


def settings(**changes: Any) -> dict[str, Any]:
    """A deep copy of SETTINGS with top-level changes."""
    return {**copy.deepcopy(SETTINGS), **changes}


def with_runtime(index: int, **changes: Any) -> dict[str, Any]:
    """SETTINGS with one runtime's fields changed."""
    data = settings()
    data["inference_runtimes"][index].update(changes)
    return data
