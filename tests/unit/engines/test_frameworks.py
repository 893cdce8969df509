"""The built-in framework modules' own rules, read directly (their callers' tests read them through
the renderer, invoke, the matrix adapters and the bench parser)."""

from __future__ import annotations

from gco import engines
from gco.bench.analysis.enginelog import parse_log
from gco.bench.analysis.launchfacts import family_hint
from gco.engines.base import Launch


def test_vllm_s_model_implementation_line_is_no_attention_backend() -> None:
    both = parse_log(["INFO Using Transformers backend.", "INFO Using Flash Attention backend."])
    assert both.attention_backend == "Flash Attention"
    assert parse_log(["INFO Using Transformers backend."]).attention_backend is None


def test_vllm_s_cannot_use_flash_attention_line_is_a_fallback() -> None:
    found = parse_log(["WARNING Cannot use FlashAttention-2 backend for head size 72."])
    assert found.attention_fallback is True
    assert found.gate_evidence["attention fallback"] == [
        "WARNING Cannot use FlashAttention-2 backend for head size 72."
    ]


def test_each_framework_shards_over_more_than_one_gpu_its_own_way() -> None:
    many = Launch(model="m", revision=None, port=9000, gpus=4)
    assert engines.get("vllm").launch_args(many)[-2:] == ["--tensor-parallel-size", "4"]
    assert engines.get("sglang").launch_args(many)[-2:] == ["--tp", "4"]
    assert engines.get("tgi").launch_env(many) == {"PORT": "9000", "MODEL_ID": "m", "NUM_SHARD": "4"}
    one = Launch(model=None, revision=None, port=9000, gpus=1)
    assert engines.get("vllm").launch_args(one) == ["--port", "9000"]
    assert engines.get("tgi").launch_env(one) == {"PORT": "9000"}


def test_a_container_without_a_known_launch_is_the_default_framework_s() -> None:
    framework, read = engines.launched(["--port", "8000"], {})
    assert (framework.name, read.model, read.revision) == ("vllm", "", "")


def test_tgi_s_special_tokens_add_no_text() -> None:
    tgi = engines.get("tgi")
    assert tgi.event_text({"token": {"text": "</s>", "special": True}}) == ""
    assert tgi.event_text({"token": {"text": " Hi", "special": False}}) == " Hi"
    assert tgi.event_text({"generated_text": "x"}) == ""


def test_a_launch_naming_vllm_in_passing_is_read_as_the_engine_it_launches() -> None:
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "/models/vllm-tuned"]
    assert family_hint(argv) == "sglang"
    assert family_hint(["text-generation-launcher", "--model-id", "/data/vllm"]) == "tgi"
    assert family_hint(["vllm", "serve", "m"]) == "vllm"
    assert family_hint(["./server"]) is None
