"""Records with fixed tokens, so rendered objects are byte-for-byte reproducible."""

from __future__ import annotations

from typing import Any

from gco.endpoints.record import EndpointRecord, parse_record

LIFECYCLE = "1" * 64
OTHER_LIFECYCLE = "2" * 64
GEN_EAST = "e" * 64
GEN_WEST = "f" * 64
DELETION = "d" * 64
EAST, WEST = "us-east-1", "eu-west-1"
IMAGE = "vllm/vllm-openai:v0.6.3"
DIGEST_IMAGE = "vllm/vllm-openai@sha256:" + "a" * 64


def make_record(spec: dict[str, Any] | None = None, **fields: Any) -> EndpointRecord:
    data: dict[str, Any] = {
        "endpoint_name": "llama",
        "lifecycle_id": LIFECYCLE,
        "desired_state": "running",
        "target_regions": [EAST, WEST],
        "cleanup_regions": [EAST, WEST],
        "region_generations": {EAST: GEN_EAST, WEST: GEN_WEST},
        "namespace": "gco-inference",
        "spec": {"image": IMAGE, "model_id": "meta-llama/Llama-3.1-8B-Instruct", **(spec or {})},
        "ingress_path": "/inference/llama",
        "created_at": "2026-01-01T00:00:00.000000Z",
        "updated_at": "2026-01-01T00:00:00.000000Z",
    }
    data.update(fields)
    return parse_record(data)
