"""The fake engine's start-up lines are real engine lines: rendered with a fixture's own values, each is
a line of that fixture; rendered with the fake's flags, they say what the real engine would."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gco.bench.analysis.enginelog import parse_log
from gco.bench.analysis.launchfacts import LaunchCommand
from gco.bench.fake_engine.startup.base import EngineFlags
from gco.bench.fake_engine.startup.lines import render, startup_lines
from tests.fixtures.logs import log_lines

FIXTURE_VALUES = {
    "vllm-0.11-serve.log": (
        "vllm",
        {
            "model": "/models/mistral-7b",
            "quantization": "gptq",
            "enforce_eager": "False",
            "cudagraph_mode": "[2,1]",
            "non_default_args": "{'model_tag': '/models/mistral-7b', 'model': '/models/mistral-7b', "
            "'dtype': 'float16', 'quantization': 'gptq'}",
        },
    ),
    "tgi-2.2.0.log": (
        "tgi",
        {"model": "meta-llama/Meta-Llama-3.1-8B-Instruct", "port": "80", "cuda_graphs": "None"},
    ),
    "sglang-offline-engine.log": (
        "sglang",
        {
            "model": "qwen/qwen2.5-0.5b-instruct",
            "port": "30000",
            "disable_cuda_graph": "False",
            "cpu_offload_gb": "0",
            "enable_hierarchical_cache": "False",
        },
    ),
}


@pytest.mark.parametrize("fixture", sorted(FIXTURE_VALUES))
def test_every_template_line_is_a_line_of_the_real_log(fixture: str) -> None:
    style, fill = FIXTURE_VALUES[fixture]
    real = log_lines(fixture)
    rendered = render(style, fill)
    assert all(line in real for line in rendered)
    assert [real.index(line) for line in rendered] == sorted(real.index(line) for line in rendered)


def test_the_fakes_flags_read_as_the_real_engines_flags() -> None:
    flags = EngineFlags(model="fake/model", port=8000, cpu_offload_gb=8)
    lines = startup_lines("vllm", flags, {}, [])
    alone = parse_log(lines)
    assert alone.gpu_offload is True and alone.cuda_graphs is True
    assert "cpu_offload_gb" not in alone.settings  # as in vLLM 0.11: only the non-default args say it
    argv = ["python", "-m", "gco.bench.fake_engine", "--cpu-offload-gb", "8"]
    assert parse_log(lines, LaunchCommand(argv=argv)).gate_violations == ["gpu offload"]
    eager = parse_log(startup_lines("vllm", replace(flags, enforce_eager=True, cpu_offload_gb=0), {}, []))
    assert eager.gate_violations == ["cuda graphs off"]
    tgi = startup_lines("tgi", EngineFlags(model="m", port=1, cuda_graphs="0"), {}, [])
    assert not any("Using default cuda graphs" in line for line in tgi)
    assert parse_log(tgi).gate_violations == ["cuda graphs off"]
    sglang = parse_log(
        startup_lines("sglang", EngineFlags(model="m", port=1, enable_hierarchical_cache=True), {}, [])
    )
    assert sglang.gate_violations == ["gpu offload"]


def test_settings_replace_only_what_the_line_carries() -> None:
    flags = EngineFlags(model="m", port=1)
    lines = startup_lines("vllm", flags, {"enforce_eager": "True"}, ["WARNING extra"])
    assert parse_log(lines).settings["enforce_eager"] == "True" and lines[-1] == "WARNING extra"
    with pytest.raises(ValueError, match="no setting 'nope'"):
        startup_lines("tgi", flags, {"nope": "1"}, [])
    with pytest.raises(ValueError, match="unknown style"):
        startup_lines("other", flags, {}, [])
