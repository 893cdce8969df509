"""The pure vLLM and TGI adapters: bodies, paths, launch, response and model-info readers."""

from __future__ import annotations

from typing import Any

import pytest

from gco.validation import adapters, parse_settings
from gco.validation.checks import endpoint_spec
from tests.unit.validation.sample import SETTINGS, TGI_REVISION, VLLM_IMAGE, VLLM_REVISION

PARSED = parse_settings(SETTINGS)
VLLM, TGI = PARSED.inference_runtimes


def test_request_bodies_and_paths() -> None:
    assert adapters.request_body(PARSED, TGI) == {
        "inputs": "Say hello.",
        "parameters": {"do_sample": False, "max_new_tokens": 8},
    }
    assert adapters.request_body(PARSED, VLLM) == {
        "model": "HuggingFaceTB/SmolLM2-135M",
        "prompt": "Say hello.",
        "max_tokens": 8,
        "temperature": 0,
        "stream": False,
    }
    assert (adapters.request_path(VLLM), adapters.request_path(TGI)) == ("/v1/completions", "/generate")
    assert (adapters.model_info_path(VLLM), adapters.model_info_path(TGI)) == ("/v1/models", "/info")


def test_launch_env_and_args() -> None:
    assert adapters.launch_env(TGI) == {
        "MODEL_ID": "HuggingFaceTB/SmolLM2-135M-Instruct",
        "PORT": "8080",
        "REVISION": TGI_REVISION,
    }
    assert adapters.launch_env(VLLM) == {"MODEL": "HuggingFaceTB/SmolLM2-135M"}
    assert adapters.launch_args(VLLM) == [
        "--model",
        "HuggingFaceTB/SmolLM2-135M",
        "--revision",
        VLLM_REVISION,
    ]
    assert adapters.launch_args(TGI) == []


def test_a_framework_the_matrix_does_not_run_is_launched_and_read_as_its_own_adapter_says() -> None:
    sglang = VLLM.model_copy(update={"framework": "sglang", "port": 30000})
    assert adapters.launch_args(sglang) == [
        "--model-path",
        "HuggingFaceTB/SmolLM2-135M",
        "--host",
        "0.0.0.0",  # noqa: S104 - SGLang's own launch names the pod's interface
        "--port",
        "30000",
        "--enable-metrics",
    ]
    assert adapters.launch_env(sglang) == {}
    assert (adapters.model_info_path(sglang), adapters.response_field(sglang)) == (
        "/v1/models",
        "choices[0].text",
    )
    assert adapters.served_model(sglang, {"data": [{"id": "m"}]}) == (["m"], None)


def test_the_endpoint_specs_use_the_image_exactly_and_the_hpa_role_autoscales() -> None:
    baseline, hpa = endpoint_spec(PARSED, VLLM, "baseline"), endpoint_spec(PARSED, VLLM, "hpa")
    assert baseline["image"] == VLLM_IMAGE and baseline["require_digest"] is True
    assert baseline["replicas"] == 1 and "autoscaling" not in baseline
    assert hpa["autoscaling"] == {
        "enabled": True,
        "min_replicas": 2,
        "max_replicas": 2,
        "metrics": [{"type": "cpu", "target": 70}],
    }
    assert (hpa["accelerator"], hpa["gpu_count"], hpa["health_check_path"]) == ("nvidia", 0, "/health")


@pytest.mark.parametrize(
    ("runtime", "body", "text"),
    [
        (VLLM, {"choices": [{"text": " hi"}]}, " hi"),
        (VLLM, {"choices": [{"text": ""}]}, None),
        (VLLM, {"choices": []}, None),
        (VLLM, {"choices": [{"text": 5}]}, None),
        (VLLM, "not json", None),
        (TGI, {"generated_text": "hello"}, "hello"),
        (TGI, {"generated_text": ""}, None),
        (TGI, {"generated_text": None}, None),
        (TGI, [{"generated_text": "hello"}], None),
        (TGI, {}, None),
    ],
)
def test_the_response_contract(runtime: Any, body: Any, text: str | None) -> None:
    assert adapters.response_text(runtime, body) == text


def test_served_model_readers() -> None:
    models = {"object": "list", "data": [{"id": "a", "root": "a"}, {"id": "b"}, "junk"]}
    assert adapters.served_model(VLLM, models) == (["a", "b"], None)
    assert adapters.served_model(VLLM, []) == ([], None)
    assert adapters.served_model(TGI, {"model_id": "m", "model_sha": "abc"}) == (["m"], "abc")
    assert adapters.served_model(TGI, {"model_id": "m", "model_sha": None}) == (["m"], None)
    assert adapters.served_model(TGI, "x") == ([], None)


def test_launched_revision_reads_the_container() -> None:
    vllm = {"args": ["--model", "m", "--revision", "r1"]}
    tgi = {"env": [{"name": "MODEL_ID", "value": "m"}, {"name": "REVISION", "value": "r2"}]}
    assert adapters.launched_revision(VLLM, vllm) == "r1"
    assert adapters.launched_revision(TGI, tgi) == "r2"
    assert adapters.launched_revision(VLLM, {"args": ["--revision"]}) is None
    assert adapters.launched_revision(TGI, {}) is None
