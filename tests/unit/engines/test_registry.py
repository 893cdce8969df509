"""The engine registry: adding a framework is one module, which every part of gco then serves.

A test framework (`toy`, tests/unit/engines/toy.py) registered by a fixture, and removed after,
shows up in the spec's schema and validation, the CLI's `--framework` choices, the rendered pods
and autoscaler query, invoke's requests, the local stack's engine table and the bench's log parser.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from gco import engines
from gco.bench.analysis.enginelog import parse_log
from gco.bench.analysis.launchfacts import LaunchCommand, family_hint
from gco.bench.fake_log import startup_lines, styles
from gco.cli import cli
from gco.cli.inference import FrameworkChoice
from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.spec import parse_spec, spec_json_schema
from gco.engines.base import EngineFlags, Framework, Launch
from gco.invoke import default_request, event_text, stream_request
from gco.local.region.engines import EngineTable, launch_of
from gco.reconcile.render import render
from tests.unit.engines.toy import Toy
from tests.unit.reconcile.records import EAST, make_record

BUILTIN = ("vllm", "tgi", "sglang")
TOY_SPEC: dict[str, Any] = {"framework": "toy", "port": 7000, "model_revision": "v2", "gpu_count": 2}


@pytest.fixture
def toy() -> Iterator[Framework]:
    framework = engines.register(Toy())
    yield framework
    engines.unregister(Toy.name)


def serving_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = next(obj for obj in objects if obj["kind"] == "Deployment")
    return deployment["spec"]["template"]["spec"]["containers"][0]  # type: ignore[no-any-return]


def test_the_builtin_frameworks_are_registered_in_order() -> None:
    assert engines.names() == BUILTIN
    assert engines.DEFAULT == "vllm"
    assert spec_json_schema()["properties"]["framework"]["enum"] == list(BUILTIN)
    with pytest.raises(InvalidSpecError, match=r"spec\.framework: Input should be 'vllm', 'tgi' or 'sglang'"):
        parse_spec({"image": "x:1", "framework": "toy"})


def test_a_registered_framework_is_an_allowed_spec_value(toy: Framework) -> None:
    assert spec_json_schema()["properties"]["framework"]["enum"] == [*BUILTIN, "toy"]
    assert parse_spec({"image": "x:1", "framework": "toy"}).framework == "toy"


def test_a_registered_framework_is_a_cli_choice(toy: Framework) -> None:
    help_text = CliRunner().invoke(cli, ["inference", "deploy", "--help"]).output
    assert "[vllm|tgi|sglang|toy]" in help_text
    assert FrameworkChoice().convert("toy", None, None) == "toy"


def test_a_removed_framework_is_no_cli_choice() -> None:
    help_text = CliRunner().invoke(cli, ["inference", "deploy", "--help"]).output
    assert "[vllm|tgi|sglang]" in help_text


def test_the_renderer_launches_a_registered_framework_as_its_module_says(toy: Framework) -> None:
    model = "meta-llama/Llama-3.1-8B-Instruct"  # make_record's model
    container = serving_container(render(make_record(TOY_SPEC), EAST))
    assert container["args"] == ["--weights", model, "--listen-port", "7000", "--shards", "2"]
    assert {"name": "TOY_REVISION", "value": "v2"} in container["env"]
    autoscaled = {
        **TOY_SPEC,
        "autoscaling": {"enabled": True, "metrics": [{"type": "queue_depth", "target": 4}]},
    }
    scaled = next(o for o in render(make_record(autoscaled), EAST) if o["kind"] == "ScaledObject")
    assert "sum(toy_waiting_requests{" in scaled["spec"]["triggers"][0]["metadata"]["query"]


def test_the_local_stack_reads_back_a_registered_framework_s_launch(toy: Framework) -> None:
    deployment = next(o for o in render(make_record(TOY_SPEC), EAST) if o["kind"] == "Deployment")
    launch = launch_of(deployment["spec"]["template"])
    assert launch is not None
    assert (launch.framework, launch.model, launch.revision) == (
        "toy",
        "meta-llama/Llama-3.1-8B-Instruct",
        "v2",
    )
    assert "toy" in EngineTable.fake().commands
    # The fake engine it runs takes the style; with no start-up template it logs no start-up lines.
    assert "toy" in styles()
    assert startup_lines("toy", EngineFlags(model="m", port=1), {}, ["WARNING extra"]) == ["WARNING extra"]


def test_invoke_asks_a_registered_framework_in_its_own_shape(toy: Framework) -> None:
    spec = parse_spec({"image": "x:1", **TOY_SPEC})
    assert default_request(spec, "hi") == ("/infer", {"text": "hi", "limit": 32})
    assert stream_request(spec, "hi")[0] == "/infer/stream"
    assert event_text('{"delta": " there"}', "toy") == " there"


def test_the_bench_parser_reads_a_registered_framework_s_log_and_launch(toy: Framework) -> None:
    lines = [
        'INFO toy-serve config: {"graphs": true, "offload": false, "version": "1.0"}',
        "toy kernels: fastpath",
    ]
    plain = parse_log(lines)
    assert (plain.family, plain.engine_version, plain.status) == ("toy", "1.0", "RESOLVED")
    assert (plain.cuda_graphs, plain.gpu_offload, plain.attention_backend) == (True, False, "fastpath")
    launched = parse_log(lines, LaunchCommand(argv=["toy-serve", "--weights", "m", "--no-graphs"]))
    assert launched.cuda_graphs is False and "argv --no-graphs" in launched.gate_evidence["cuda graphs off"]
    assert family_hint(["/usr/bin/toy-serve", "--weights", "m"]) == "toy"
    assert parse_log(["toy kernels: slowpath"]).attention_fallback is True


def test_every_framework_reads_back_the_launch_it_renders() -> None:
    for framework in engines.frameworks():
        launch = Launch(model="org/model", revision="abc", port=framework.default_port, gpus=2)
        found, read = engines.launched(framework.launch_args(launch), framework.launch_env(launch))
        assert (found.name, read.model) == (framework.name, "org/model")
        assert read.revision in ("abc", "")  # a framework that cannot pin a revision reads none


def test_the_registry_refuses_a_second_framework_of_a_name_and_keeps_the_default(toy: Framework) -> None:
    with pytest.raises(engines.FrameworkRegistrationError, match="'toy' is registered already"):
        engines.register(Toy())
    with pytest.raises(
        engines.FrameworkRegistrationError, match="default framework 'vllm' cannot be removed"
    ):
        engines.unregister("vllm")
    with pytest.raises(engines.UnknownFrameworkError):
        engines.get("nope")
