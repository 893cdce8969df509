"""The record's failure list, each engine's resolved configuration, and why GPU memory went unchecked."""

from __future__ import annotations

from gco.bench.analysis.enginelog import parse_log
from gco.bench.analysis.launchfacts import LaunchCommand
from gco.bench.rounds.gpu import NOT_LAUNCHED, NVML_UNAVAILABLE, MemoryCheck
from gco.bench.rounds.limitations import cell_limitations
from gco.bench.rounds.rundata import failure_list, resolved_configs
from tests.fixtures.logs import log_lines
from tests.unit.bench.test_summary import _cell, _serve


def test_failures_name_the_cell_and_what_failed() -> None:
    cells = [
        _cell("a", 1, 100.0, serve=_serve(100.0, failed=2)),
        _cell("b", 1, 1.0, status="not_ready", serve=None, error="ready check /health: timeout"),
        _cell("c", 1, 50.0),
    ]
    assert failure_list(cells) == [
        {
            "label": "a",
            "round": 1,
            "kind": "failed_requests",
            "failed_of_sent": {"0-128": [2, 6], "all": [2, 6]},
        },
        {"label": "b", "round": 1, "kind": "not_ready", "error": "ready check /health: timeout"},
    ]


def test_resolved_configs_carry_the_gates_and_their_evidence() -> None:
    argv = ["vllm", "serve", "/models/mistral-7b", "--cpu-offload-gb", "8"]
    config = parse_log(log_lines("vllm-0.11-serve.log"), LaunchCommand(argv=argv))
    configs = resolved_configs([_cell("a", 1, 100.0, config=config), _cell("a", 2, 100.0, config=config)])
    assert [entry["round"] for entry in configs["a"]] == [1, 2]
    first = configs["a"][0]
    assert first["gate_violations"] == ["gpu offload"]
    assert first["gate_evidence"]["gpu offload"] == ["argv --cpu-offload-gb 8"]
    assert first["engine_version"] == "v0.11.0+582e4e37.nv25.11"
    assert first["settings"]["structured_outputs_config"].startswith("StructuredOutputsConfig(")


def test_gpu_memory_not_checked_says_why_for_each_cell() -> None:
    unlaunched = MemoryCheck(status="not checked", tolerance_mib=512, reason=NOT_LAUNCHED)
    no_nvml = MemoryCheck(status="not checked", tolerance_mib=512, reason=NVML_UNAVAILABLE)
    cells = [
        _cell("a", 1, 100.0, status="launch_failed", serve=None, memory=unlaunched),
        _cell("b", 1, 100.0, memory=no_nvml),
        _cell("b", 2, 100.0),
    ]
    texts = [
        item.text
        for item in cell_limitations(cells, ["a", "b"], "single")
        if item.code == "gpu_memory_not_checked"
    ]
    assert texts == [
        f"GPU memory return not checked ({NVML_UNAVAILABLE}): b round 1",
        f"GPU memory return not checked ({NOT_LAUNCHED}): a round 1",
    ]
