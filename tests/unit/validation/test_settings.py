"""Every settings rule: edge values pass, each bad value fails naming its field, a bool is no int."""

from __future__ import annotations

from typing import Any

import pytest

from gco.validation import KEYS, SettingsError, parse_settings
from gco.validation.settings import POSITIVE_INTS
from tests.unit.validation.sample import SETTINGS, settings, with_runtime


def refused(data: Any) -> SettingsError:
    with pytest.raises(SettingsError) as caught:
        parse_settings(data)
    return caught.value


def test_the_sample_is_valid_and_frozen() -> None:
    parsed = parse_settings(SETTINGS)
    assert parsed.inference_runtimes[0].framework == "vllm"
    assert parsed.inference_runtimes[1].port == 8080
    assert parsed.consent is True
    with pytest.raises(ValueError, match="frozen"):
        parsed.namespace = "other"  # type: ignore[misc]
    assert set(parsed.model_dump()) == set(KEYS)


@pytest.mark.parametrize(
    "data",
    [
        settings(gpu_count=0),
        settings(gpu_count=8),
        settings(request_max_tokens=1, command_timeout_seconds=1, readiness_timeout_seconds=1),
        settings(hpa_timeout_seconds=1, deletion_timeout_seconds=1, job_timeout_seconds=1),
        settings(queue_timeout_seconds=1, poll_interval_seconds=1, monitor_interval_seconds=1),
        settings(destroy_attempts=1, destroy_retry_delay_seconds=1),
        settings(hpa_cpu_target=1, proxy_tls_cpu_target=1),
        settings(hpa_cpu_target=100, proxy_tls_cpu_target=100),
        settings(hpa_stability_intervals=2),
        settings(hpa_stability_intervals=50),
        settings(selected_region="a-b"),
        settings(selected_region="ap-southeast-7"),
        settings(namespace="gco-inference"),
        settings(request_prompt=" padded prompt "),
        settings(proxy_tls_cpu_request="1m"),
        settings(proxy_tls_cpu_request="4000m"),
        with_runtime(0, model_id="org/model name"),
        with_runtime(1, image="a@sha256:" + "f" * 64),
        with_runtime(0, image="registry.example.com:5000/team/vllm:v1@sha256:" + "0" * 64),
    ],
)
def test_edge_values_pass(data: dict[str, Any]) -> None:
    parse_settings(data)


BAD: list[tuple[dict[str, Any] | Any, str]] = [
    ([], "settings"),
    (settings(extra_key=1), "extra_key"),
    ({k: v for k, v in SETTINGS.items() if k != "namespace"}, "namespace"),
    (settings(inference_runtimes=[]), "inference_runtimes"),
    (settings(inference_runtimes=SETTINGS["inference_runtimes"][:1]), "inference_runtimes"),
    (settings(inference_runtimes=SETTINGS["inference_runtimes"] * 2), "inference_runtimes"),
    (
        settings(inference_runtimes=list(reversed(SETTINGS["inference_runtimes"]))),
        "inference_runtimes[0].framework",
    ),
    (settings(inference_runtimes="vllm,tgi"), "inference_runtimes"),
    (settings(inference_runtimes=["vllm", "tgi"]), "inference_runtimes[0]"),
    (with_runtime(1, framework="sglang"), "inference_runtimes[1].framework"),
    (with_runtime(0, extra="x"), "inference_runtimes[0].extra"),
    (with_runtime(0, image="vllm/vllm-openai:v0.6.3"), "inference_runtimes[0].image"),
    (with_runtime(0, image="vllm/vllm-openai@sha256:" + "A" * 64), "inference_runtimes[0].image"),
    (with_runtime(0, image="vllm/vllm-openai@sha256:" + "1" * 63), "inference_runtimes[0].image"),
    (with_runtime(1, image="tgi@sha256:" + "2" * 64 + "\n"), "inference_runtimes[1].image"),
    (with_runtime(1, image=5), "inference_runtimes[1].image"),
    (with_runtime(1, image="tgi@sha256:" + "1" * 64), "inference_runtimes[1].image"),  # same digest as vLLM's
    (with_runtime(0, model_id=""), "inference_runtimes[0].model_id"),
    (with_runtime(0, model_id="   "), "inference_runtimes[0].model_id"),
    (with_runtime(1, model_id=" org/model"), "inference_runtimes[1].model_id"),
    (with_runtime(1, model_id="org/model\n"), "inference_runtimes[1].model_id"),
    (with_runtime(0, model_revision="main"), "inference_runtimes[0].model_revision"),
    (with_runtime(0, model_revision="A" * 40), "inference_runtimes[0].model_revision"),
    (with_runtime(1, model_revision="b" * 39), "inference_runtimes[1].model_revision"),
    (with_runtime(1, model_revision="b" * 41), "inference_runtimes[1].model_revision"),
    (with_runtime(0, port=8080), "inference_runtimes[0].port"),
    (with_runtime(1, port=8000), "inference_runtimes[1].port"),
    (with_runtime(1, port="8080"), "inference_runtimes[1].port"),
    (
        {**with_runtime(0), "inference_runtimes": [{"framework": "vllm"}, SETTINGS["inference_runtimes"][1]]},
        "inference_runtimes[0].image",
    ),
    (settings(selected_region="US-EAST-1"), "selected_region"),
    (settings(selected_region="useast1"), "selected_region"),
    (settings(selected_region="us-east-1-"), "selected_region"),
    (settings(selected_region=1), "selected_region"),
    (settings(request_prompt=""), "request_prompt"),
    (settings(request_prompt=" \n\t"), "request_prompt"),
    (settings(namespace="Gco"), "namespace"),
    (settings(namespace="-gco"), "namespace"),
    (settings(namespace="a" * 64), "namespace"),
    (settings(namespace="gco.inference"), "namespace"),
    (settings(namespace="a" * 63), "namespace"),  # a DNS label, but not granted to the reconciler
    (settings(namespace="gco-system"), "namespace"),  # granted, but the shared proxy's, not endpoints'
    (settings(gpu_count=-1), "gpu_count"),
    (settings(gpu_count=1.0), "gpu_count"),
    (settings(endpoint_count=3), "endpoint_count"),
    (settings(endpoint_count=5), "endpoint_count"),
    (settings(baseline_replicas=2), "baseline_replicas"),
    (settings(autoscale_initial_replicas=2), "autoscale_initial_replicas"),
    (settings(hpa_min_replicas=1), "hpa_min_replicas"),
    (settings(hpa_max_replicas=3), "hpa_max_replicas"),
    (settings(hpa_cpu_target=0), "hpa_cpu_target"),
    (settings(hpa_cpu_target=101), "hpa_cpu_target"),
    (settings(hpa_cpu_target=50.0), "hpa_cpu_target"),
    (settings(hpa_stability_intervals=1), "hpa_stability_intervals"),
    (settings(health_path="/healthz"), "health_path"),
    (settings(health_path="/health/"), "health_path"),
    (settings(proxy_tls_cpu_request="0m"), "proxy_tls_cpu_request"),
    (settings(proxy_tls_cpu_request="250"), "proxy_tls_cpu_request"),
    (settings(proxy_tls_cpu_request="0.25"), "proxy_tls_cpu_request"),
    (settings(proxy_tls_cpu_request="250m "), "proxy_tls_cpu_request"),
    (settings(proxy_tls_cpu_target=0), "proxy_tls_cpu_target"),
    (settings(proxy_tls_cpu_target=101), "proxy_tls_cpu_target"),
    (settings(consent=False), "consent"),
    (settings(consent="true"), "consent"),
    (settings(consent=1), "consent"),
    *[(settings(**{key: 0}), key) for key in POSITIVE_INTS],
    *[(settings(**{key: -3}), key) for key in POSITIVE_INTS],
    *[(settings(**{key: "5"}), key) for key in POSITIVE_INTS],
    *[(settings(**{key: 2.5}), key) for key in POSITIVE_INTS],
]


@pytest.mark.parametrize(("data", "field"), BAD, ids=[f"{i}-{field}" for i, (_, field) in enumerate(BAD)])
def test_each_bad_value_fails_naming_its_field(data: Any, field: str) -> None:
    error = refused(data)
    assert error.field == field
    assert str(error).startswith(f"{field}: ")
    assert error.exit_code == 2
    assert "\n" not in str(error)


INT_FIELDS = [*POSITIVE_INTS, "gpu_count", "hpa_cpu_target", "proxy_tls_cpu_target"]


@pytest.mark.parametrize("field", INT_FIELDS)
@pytest.mark.parametrize("value", [True, False])
def test_a_bool_is_refused_for_every_int_field(field: str, value: bool) -> None:
    assert refused(settings(**{field: value})).field == field


@pytest.mark.parametrize("index", [0, 1])
def test_a_bool_is_refused_for_a_runtime_port(index: int) -> None:
    assert refused(with_runtime(index, port=True)).field == f"inference_runtimes[{index}].port"


def test_the_rules_run_in_a_fixed_order() -> None:
    # Several broken at once: the first in the documented order is the one named, every time.
    data = settings(consent=False, namespace="Bad", gpu_count=-1, selected_region="x")
    data["inference_runtimes"][1]["port"] = 1
    assert refused(data).field == "inference_runtimes[1].port"
    data["inference_runtimes"][1]["port"] = 8080
    assert refused(data).field == "selected_region"
    data["selected_region"] = "us-east-1"
    assert refused(data).field == "namespace"
    data["namespace"] = "gco-inference"
    assert refused(data).field == "gpu_count"
    data["gpu_count"] = 0
    assert refused(data).field == "consent"


def test_every_missing_key_is_named() -> None:
    for key in KEYS:
        data = settings()
        del data[key]
        assert refused(data).field == key
    for key in ("framework", "image", "model_id", "model_revision", "port"):
        data = settings()
        del data["inference_runtimes"][1][key]
        assert refused(data).field == f"inference_runtimes[1].{key}"
