"""Gate evidence read from the argv and environment the harness launches an engine with."""

from __future__ import annotations

from gco.bench.analysis.launchfacts import LaunchCommand, family_hint, launch_facts, options, tokens
from tests.fixtures.logs import described


def test_flag_forms_are_read_alike() -> None:
    argv = ["vllm", "serve", "m", "--cpu_offload_gb=4", "--enforce-eager", "--port", "8000", "-O3"]
    assert options(argv) == {
        "--cpu-offload-gb": ["4"],
        "--enforce-eager": [""],
        "--port": ["8000"],
        "-O": ["3"],
    }
    assert tokens(["bash", "-c", "vllm serve m --cpu-offload-gb 2"])[2:] == [
        "vllm",
        "serve",
        "m",
        "--cpu-offload-gb",
        "2",
    ]
    assert tokens(["vllm", "--compilation-config", '{"level": 0}']) == [
        "vllm",
        "--compilation-config",
        '{"level": 0}',
    ]


def test_the_command_a_real_offloading_log_came_from() -> None:
    argv = described("vllm-0.6.3-namespace-offload-excerpt.log", "command").split()
    assert family_hint(argv) == "vllm"
    facts = launch_facts(LaunchCommand(argv=argv), None)
    assert facts.offload == ["argv --cpu-offload-gb 2"]
    assert facts.offload_decided


def test_vllm_offloading_connectors_and_graph_settings() -> None:
    def facts(*flags: str) -> tuple[list[str], list[str]]:
        found = launch_facts(LaunchCommand(argv=["vllm", "serve", "m", *flags]), "vllm")
        return found.offload, found.cuda_graphs_off

    assert facts("--kv-transfer-config", '{"kv_connector":"OffloadingConnector","kv_role":"kv_both"}')[0]
    assert not facts("--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}')[0]
    assert facts("--kv-offloading-size", "16")[0] == ["argv --kv-offloading-size 16"]
    assert facts("--cpu-offload-gb", "0") == ([], [])
    assert facts("-O", "3") == ([], [])
    assert facts("--compilation-config", '{"level": 3, "use_cudagraph": false}')[1]
    assert facts("--compilation-config", '{"cudagraph_mode": "FULL_AND_PIECEWISE"}') == ([], [])
    assert not launch_facts(
        LaunchCommand(argv=["vllm", "serve", "--config", "c.yaml"]), "vllm"
    ).offload_decided


def test_tgi_reads_its_environment_and_unknown_engines_decide_nothing() -> None:
    tgi = launch_facts(LaunchCommand(argv=["text-generation-launcher"], env={"CUDA_GRAPHS": "0"}), None)
    assert tgi.cuda_graphs_off == ["--cuda-graphs/CUDA_GRAPHS 0"] and tgi.offload_decided
    other = launch_facts(LaunchCommand(argv=["./server", "--cpu-offload-gb", "8"]), None)
    assert other.offload == [] and not other.offload_decided
