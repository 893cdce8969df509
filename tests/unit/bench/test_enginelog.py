"""Resolved-configuration parsing of vLLM, TGI and SGLang logs: status, hard gates, backend, unknowns."""

from __future__ import annotations

from gco.bench.enginelog import parse_log, warning_text
from gco.bench.fake_log import DEFAULT_SETTINGS, startup_lines

VLLM = [
    "INFO 06-01 12:00:00 [core.py:58] Initializing a V1 LLM engine (v0.9.1) with config: model='meta/llama', "
    "speculative_config=None, tokenizer='meta/llama', dtype=torch.bfloat16, max_seq_len=8192, "
    'enforce_eager=False, cpu_offload_gb=0, compilation_config={"level":3}',
    "INFO 06-01 12:00:01 [cuda.py:217] Using Flash Attention backend on V1 engine.",
]


def test_vllm_config_line_resolves_and_passes_the_gates() -> None:
    config = parse_log(VLLM)
    assert config.family == "vllm"
    assert config.status == "RESOLVED"
    assert config.settings["dtype"] == "torch.bfloat16"
    assert config.settings["model"] == "meta/llama"
    assert config.attention_backend == "Flash Attention"
    assert config.cuda_graphs is True
    assert config.gpu_offload is False
    assert config.gate_violations == []


def test_vllm_eager_offload_and_fallback_violate_the_gates() -> None:
    lines = [
        VLLM[0]
        .replace("enforce_eager=False", "enforce_eager=True")
        .replace("cpu_offload_gb=0", "cpu_offload_gb=4"),
        "WARNING 06-01 [cuda.py:1] Cannot use FlashAttention-2 backend for head size 72.",
        "INFO 06-01 [cuda.py:2] Using XFormers backend.",
    ]
    config = parse_log(lines)
    assert config.gate_violations == ["cuda graphs off", "attention fallback", "gpu offload"]
    assert config.attention_backend == "XFormers"
    assert len(config.warnings) == 1


def test_tgi_args_block() -> None:
    lines = [
        'INFO text_generation_launcher: Args { model_id: "bigscience/bloom", revision: None, '
        "dtype: Some(BFloat16), cuda_graphs: Some([0]), max_batch_prefill_tokens: Some(4096) }",
        "INFO text_generation_launcher: Using Attention = flashinfer",
    ]
    config = parse_log(lines)
    assert config.family == "tgi"
    assert config.settings["model_id"] == "bigscience/bloom"
    assert config.cuda_graphs is False
    assert config.attention_backend == "flashinfer"
    assert config.status == "RESOLVED"
    assert "cuda graphs off" in config.gate_violations


def test_sglang_server_args_and_unknown_settings() -> None:
    lines = [
        "[2025-01-01 00:00:00] server_args=ServerArgs(model_path='qwen/q', dtype='auto', "
        "disable_cuda_graph=False, attention_backend='flashinfer', cpu_offload_gb=0)",
        "WARNING unknown setting: 'foo_bar'",
        "WARNING 01-01 [envs.py:1] Unknown vLLM environment variable detected: VLLM_NOPE",
    ]
    config = parse_log(lines)
    assert (config.family, config.status) == ("sglang", "RESOLVED")
    assert config.attention_backend == "flashinfer"
    assert config.unknown_settings == ["foo_bar", "VLLM_NOPE"]


def test_partial_self_reported_and_unproven() -> None:
    partial = parse_log(["INFO Initializing a V1 LLM engine with config: model='m', dtype=auto"])
    assert partial.status == "PARTIAL"
    assert partial.cuda_graphs is None
    reported = parse_log(["INFO [utils.py:1] non-default args: {'model': 'm', 'enforce_eager': True}"])
    assert reported.status == "SELF_REPORTED"
    assert reported.cuda_graphs is False
    assert parse_log(["hello", "Using Attention = sdpa"]).status == "UNPROVEN"
    assert parse_log([]).family is None


def test_fake_engine_start_up_lines_parse_in_every_style() -> None:
    for style in ("vllm", "tgi", "sglang"):
        config = parse_log(startup_lines(style, DEFAULT_SETTINGS[style], []))
        assert config.family == style
        assert config.status == "RESOLVED", style
        assert config.gate_violations == []


def test_a_config_line_decides_and_the_self_reported_names_are_kept() -> None:
    lines = [
        *VLLM,
        "INFO 06-01 12:00:00 [utils.py:1] non-default args: {'model': 'meta/llama', 'max_model_len': 8192}",
    ]
    config = parse_log(lines)
    assert config.status == "RESOLVED"
    assert config.settings["dtype"] == "torch.bfloat16"
    assert sorted(config.self_reported) == ["max_model_len", "model"]


def test_warning_text_drops_timestamps_only() -> None:
    assert warning_text("WARNING 06-01 12:00:00 [a.py:1] slow") == "WARNING [a.py:1] slow"
    assert warning_text("[2026-01-01 00:00:00,123] WARN x 12:00") == "[] WARN x 12:00"
    assert warning_text("2026-01-01T00:00:00.5Z WARNING y") == "WARNING y"
