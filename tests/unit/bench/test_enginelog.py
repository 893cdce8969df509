"""Configuration parsing of real vLLM (0.6-0.11), TGI (2.2, 3) and SGLang logs: status, settings, each gate.

The logs are tests/fixtures/engine_logs (each names its source); launch commands are the ones their
sources name, or those plus the one flag a test is about.
"""

from __future__ import annotations

import json

from gco.bench.analysis.enginelog import parse_log, warning_text
from gco.bench.analysis.launchfacts import LaunchCommand
from tests.fixtures.logs import described, log_lines

VLLM_011 = "vllm-0.11-serve.log"
# the command of the vLLM 0.11 fixture's source page
VLLM_011_ARGV = [
    "vllm",
    "serve",
    "/models/mistral-7b",
    "--quantization",
    "gptq",
    "--gpu-memory-utilization",
    "0.9",
    "--dtype",
    "float16",
]
# https://github.com/vllm-project/vllm/issues/16378 (vLLM 0.8 V0 worker lines, Gemma-3-27b head size 72)
XFORMERS_FALLBACK = [
    "INFO 04-10 08:57:53 [cuda.py:269] Cannot use FlashAttention-2 backend for head size 72.",
    "INFO 04-10 08:57:53 [cuda.py:282] Using XFormers backend.",
]


def test_vllm_011_log_alone_is_partial_because_its_config_line_never_prints_offload() -> None:
    config = parse_log(log_lines(VLLM_011))
    assert (config.family, config.engine_version) == ("vllm", "v0.11.0+582e4e37.nv25.11")
    assert config.status == "PARTIAL"
    assert config.cuda_graphs is True
    assert config.gpu_offload is None
    assert config.attention_backend == "Flash Attention"
    assert config.gate_evidence["cuda graphs"] == ["config compilation_config cudagraph_mode=[2,1]"]
    assert sorted(config.self_reported) == ["dtype", "model", "model_tag", "quantization"]


def test_vllm_011_nested_values_are_one_value_each() -> None:
    settings = parse_log(log_lines(VLLM_011)).settings
    assert settings["model"] == "/models/mistral-7b"
    assert settings["structured_outputs_config"] == (
        "StructuredOutputsConfig(backend='auto', disable_fallback=False, disable_any_whitespace=False, "
        "disable_additional_properties=False, reasoning_parser='')"
    )
    for inner in ("backend", "disable_fallback", "reasoning_parser", "show_hidden_metrics_for_version"):
        assert inner not in settings
    assert json.loads(settings["compilation_config"])["cudagraph_mode"] == [2, 1]
    assert settings["quantization"] == "gptq"
    assert settings["enforce_eager"] == "False"


def test_cudagraph_mode_as_vllm_010_and_011_print_it() -> None:
    """0.10.1 prints one CUDAGraphMode (1: PIECEWISE), 0.11 a pair ([2,1]: FULL_AND_PIECEWISE); 0: NONE."""
    lines = log_lines(VLLM_011)
    for mode, graphs in (("1", True), ("[2,0]", True), ("0", False)):
        config = parse_log(
            [line.replace('"cudagraph_mode":[2,1]', f'"cudagraph_mode":{mode}') for line in lines]
        )
        assert config.cuda_graphs is graphs, mode


def test_a_clean_vllm_011_launch_is_resolved_and_passes_every_gate() -> None:
    config = parse_log(log_lines(VLLM_011), LaunchCommand(argv=VLLM_011_ARGV))
    assert config.status == "RESOLVED"
    assert config.gpu_offload is False
    assert config.gate_violations == []
    assert config.gate_evidence["no gpu offload"] == ["launch command: no offload option"]


def test_offload_and_graphs_off_in_the_launch_command_violate_the_gates() -> None:
    offload = parse_log(log_lines(VLLM_011), LaunchCommand(argv=[*VLLM_011_ARGV, "--cpu-offload-gb", "8"]))
    assert offload.gate_violations == ["gpu offload"]
    assert offload.gate_evidence["gpu offload"] == ["argv --cpu-offload-gb 8"]
    for flags in (
        ["--enforce-eager"],
        ["-O0"],
        ["--compilation-config", '{"cudagraph_mode": "NONE"}'],
        ["-O.cudagraph_mode=NONE"],
    ):
        config = parse_log(log_lines(VLLM_011), LaunchCommand(argv=[*VLLM_011_ARGV, *flags]))
        assert config.gate_violations == ["cuda graphs off"], flags
    env = LaunchCommand(argv=VLLM_011_ARGV, env={"VLLM_ATTENTION_BACKEND": "XFORMERS"})
    assert parse_log(log_lines(VLLM_011), env).gate_violations == ["attention fallback"]


def test_offload_that_only_the_engine_reports_still_violates() -> None:
    lines = [
        line.replace("'quantization': 'gptq'}", "'quantization': 'gptq', 'cpu_offload_gb': 8.0}")
        for line in log_lines(VLLM_011)
    ]
    config = parse_log(lines)
    assert config.gpu_offload is True
    assert config.gate_evidence["gpu offload"] == ["logged args cpu_offload_gb=8.0"]


def test_a_sampler_fallback_is_not_an_attention_fallback() -> None:
    config = parse_log(log_lines("vllm-0.11-offline-sampler-fallback.log"))
    assert config.attention_fallback is False
    assert config.cuda_graphs is True
    assert config.settings["quantization"] == "fp8"
    assert len(config.warnings) == 1
    assert "Falling back to the PyTorch-native implementation" in config.warnings[0]


def test_vllm_09_graphs_follow_level_and_use_cudagraph() -> None:
    lines = log_lines("vllm-0.9-serve.log")
    config = parse_log(lines)
    assert (config.engine_version, config.cuda_graphs) == ("v0.9.2", True)
    assert config.gate_evidence["cuda graphs"] == ["config compilation_config level=3 use_cudagraph=true"]
    assert sorted(config.self_reported) == ["enable_sleep_mode", "host", "model"]
    for old, new in (('"use_cudagraph":true', '"use_cudagraph":false'), ('{"level":3,', '{"level":0,')):
        off = parse_log([line.replace(old, new) for line in lines])
        assert off.gate_violations == ["cuda graphs off"], new


def test_vllm_08_eager_in_a_cut_config_line() -> None:
    config = parse_log(log_lines("vllm-0.8-eager-offload-excerpt.log"))
    assert (config.family, config.status) == ("vllm", "PARTIAL")
    assert config.gate_violations == ["cuda graphs off"]
    assert config.gate_evidence["cuda graphs off"] == ["config enforce_eager=True"]
    assert config.settings["dtype"] == "torch.bfloat16"


def test_vllm_06_v0_engine_backend_and_fallback() -> None:
    lines = log_lines("vllm-0.6.6-offline.log")
    config = parse_log(lines)
    assert (config.engine_version, config.cuda_graphs) == ("v0.6.6.post1", True)
    assert config.attention_backend == "Flash Attention"
    assert config.settings["tensor_parallel_size"] == "4"
    assert config.settings["decoding_config"] == "DecodingConfig(guided_decoding_backend='xgrammar')"
    fallback = parse_log([*lines, *XFORMERS_FALLBACK])
    assert fallback.attention_backend == "XFormers"
    assert fallback.gate_violations == ["attention fallback"]


def test_vllm_06_namespace_keeps_nested_lists_whole_and_the_launch_shows_offload() -> None:
    name = "vllm-0.6.3-namespace-offload-excerpt.log"
    config = parse_log(log_lines(name))
    assert config.status == "SELF_REPORTED"
    lora = config.self_reported["lora_modules"]
    assert lora.startswith("[LoRAModulePath(name='profile_adapter'") and lora.endswith(
        "base_model_name=None)]"
    )
    assert "path" not in config.self_reported and "base_model_name" not in config.self_reported
    assert config.self_reported["model"] == "unsloth/Llama-3.2-3B"
    launched = parse_log(log_lines(name), LaunchCommand(argv=described(name, "command").split()))
    assert launched.gate_violations == ["gpu offload"]
    assert launched.gate_evidence["gpu offload"] == ["argv --cpu-offload-gb 2"]


def test_tgi_22_pretty_printed_args_block() -> None:
    config = parse_log(log_lines("tgi-2.2.0.log"))
    assert config.family == "tgi"
    assert config.settings["model_id"] == "meta-llama/Meta-Llama-3.1-8B-Instruct"
    assert config.settings["huggingface_hub_cache"] == 'Some("/data")'
    assert config.settings["disable_crash_reports"] == "false"
    assert (config.cuda_graphs, config.gpu_offload) == (True, False)
    assert config.status == "PARTIAL"  # TGI 2.2 logs no attention backend
    off = parse_log(
        log_lines("tgi-2.2.0.log"), LaunchCommand(argv=["text-generation-launcher"], env={"CUDA_GRAPHS": "0"})
    )
    assert off.gate_violations == ["cuda graphs off"]
    paged = parse_log(
        log_lines("tgi-2.2.0.log"),
        LaunchCommand(argv=["text-generation-launcher"], env={"ATTENTION": "paged"}),
    )
    assert paged.gate_violations == ["attention fallback"]


def test_tgi_3_block_cut_short_keeps_what_it_holds() -> None:
    config = parse_log(log_lines("tgi-3-args-excerpt.log"))
    assert config.settings["revision"] == 'Some("checkpoint-3773")'
    assert config.settings["kv_cache_dtype"] == "None"
    assert config.settings["watermark_delta"] == "None"
    assert "ngro" not in config.settings
    assert config.cuda_graphs is True


def test_tgi_graphs_off_in_the_block() -> None:
    lines = [
        line.replace("cuda_graphs: None,", "cuda_graphs: Some(\n[\n0,\n],\n),")
        for line in log_lines("tgi-2.2.0.log")
    ]
    config = parse_log("\n".join(lines).splitlines())
    assert config.gate_violations == ["cuda graphs off"]


def test_sglang_server_args_resolve_on_their_own() -> None:
    lines = log_lines("sglang-offline-engine.log")
    config = parse_log(lines)
    assert (config.family, config.status) == ("sglang", "RESOLVED")
    assert config.attention_backend == "fa3"
    assert (config.cuda_graphs, config.gpu_offload) == (True, False)
    assert (
        config.settings["cuda_graph_bs"].startswith("[1, 2, 4, 8")
        and config.settings["mm_process_config"] == "{}"
    )
    offload = parse_log([line.replace("cpu_offload_gb=0,", "cpu_offload_gb=4,") for line in lines])
    assert offload.gate_evidence["gpu offload"] == ["server_args cpu_offload_gb=4"]
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "qwen/qwen2.5-0.5b-instruct"]
    for flag, gate in (
        ("--disable-cuda-graph", "cuda graphs off"),
        ("--enable-hierarchical-cache", "gpu offload"),
    ):
        assert parse_log(lines, LaunchCommand(argv=[*argv, flag])).gate_violations == [gate]


def test_unknown_settings_self_reports_and_unproven() -> None:
    lines = [
        *log_lines("sglang-offline-engine.log"),
        "WARNING unknown setting: 'foo_bar'",
        "WARNING 01-01 [envs.py:1] Unknown vLLM environment variable detected: VLLM_NOPE",
    ]
    assert parse_log(lines).unknown_settings == ["foo_bar", "VLLM_NOPE"]
    reported = parse_log(["INFO [utils.py:1] non-default args: {'model': 'm', 'enforce_eager': True}"])
    assert reported.status == "SELF_REPORTED"
    assert reported.cuda_graphs is False
    assert parse_log(["hello", "Using Attention = sdpa"]).status == "UNPROVEN"
    assert parse_log([]).family is None


def test_warning_text_drops_timestamps_only() -> None:
    assert warning_text("WARNING 06-01 12:00:00 [a.py:1] slow") == "WARNING [a.py:1] slow"
    assert warning_text("[2026-01-01 00:00:00,123] WARN x 12:00") == "[] WARN x 12:00"
    assert warning_text("2026-01-01T00:00:00.5Z WARNING y") == "WARNING y"
