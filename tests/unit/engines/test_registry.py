"""The engine registry: adding a framework is a module per concern, which every part of gco then serves.

A test framework (`toy`, tests/unit/engines/toy.py) registered by a fixture, and removed after, with
its entries in the per-concern registries (the bench's log rules, the fake engine's start-up
templates, the matrix's adapters), shows up in the spec's schema and validation, the CLI's
`--framework` choices, the rendered pods and autoscaler query, invoke's requests, the local stack's
engine table, the bench's log parser and the matrix's launch. Every registered framework has an entry
in each per-concern registry.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from click.testing import CliRunner

from gco import engines
from gco.bench.analysis.enginelog import parse_log
from gco.bench.analysis.launchfacts import LaunchCommand, family_hint
from gco.bench.analysis.logrules import LOG_RULES, rules_for
from gco.bench.fake_engine.startup import STARTUP_TEMPLATES, template_for
from gco.bench.fake_engine.startup.base import EngineFlags, StartupTemplate
from gco.bench.fake_engine.startup.lines import startup_lines, styles
from gco.cli import cli
from gco.cli.inference import FrameworkChoice
from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.spec import parse_spec, spec_json_schema
from gco.engines.base import Framework, Launch
from gco.inference.invoke import default_request, event_text, stream_request
from gco.local.region.engines import EngineTable, launch_of
from gco.reconcile.render import render
from gco.validation import adapters
from gco.validation.frameworks import MATRIX_ADAPTERS, adapter_for
from gco.validation.settings import Runtime
from tests.unit.engines.toy import Toy, ToyLogRules, ToyMatrix
from tests.unit.reconcile.records import EAST, make_record

BUILTIN = ("vllm", "tgi", "sglang")
TOY_SPEC: dict[str, Any] = {"framework": "toy", "port": 7000, "model_revision": "v2", "gpu_count": 2}


# Every registry keyed by framework name outside gco/engines, and what its entry is for.
PER_CONCERN: dict[str, Mapping[str, object]] = {
    "log rules": LOG_RULES,
    "start-up template": STARTUP_TEMPLATES,
    "matrix adapter": MATRIX_ADAPTERS,
}


@pytest.fixture
def bare_toy() -> Iterator[Framework]:
    """`toy` registered as a framework only, with no entry in any per-concern registry."""
    framework = engines.register(Toy())
    yield framework
    engines.unregister(Toy.name)


@pytest.fixture
def toy(bare_toy: Framework, monkeypatch: pytest.MonkeyPatch) -> Framework:
    """`toy` registered with its module of each concern: what adding a framework is."""
    monkeypatch.setitem(LOG_RULES, Toy.name, ToyLogRules())
    monkeypatch.setitem(STARTUP_TEMPLATES, Toy.name, StartupTemplate())
    monkeypatch.setitem(MATRIX_ADAPTERS, Toy.name, ToyMatrix())
    return bare_toy


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


def test_every_registered_framework_has_an_entry_in_each_per_concern_registry() -> None:
    for concern, table in PER_CONCERN.items():
        assert engines.uncovered(table) == (), concern
        assert set(table) == set(engines.names()), concern  # no entry for a framework that is not one


def test_the_registered_test_framework_is_covered_too(toy: Framework) -> None:
    assert all(engines.uncovered(table) == () for table in PER_CONCERN.values())
    assert rules_for("toy").program is not None
    assert template_for("toy").lines() == []
    assert adapter_for("toy").model_info_path == "/about"


def test_a_framework_without_its_entries_is_named_where_one_is_asked_for(bare_toy: Framework) -> None:
    for table in PER_CONCERN.values():
        assert engines.uncovered(table) == ("toy",)
    with pytest.raises(engines.MissingFrameworkEntryError, match="'toy' has no log rules"):
        parse_log(["INFO starting"])
    with pytest.raises(engines.MissingFrameworkEntryError, match="'toy' has no start-up template"):
        startup_lines("toy", EngineFlags(model="m", port=1), {}, [])
    with pytest.raises(engines.MissingFrameworkEntryError, match="'toy' has no matrix adapter"):
        adapter_for("toy")
    with pytest.raises(engines.UnknownFrameworkError):
        rules_for("nope")


def test_the_matrix_launches_and_reads_a_registered_framework_as_its_modules_say(toy: Framework) -> None:
    runtime = Runtime(framework="toy", image="x:1", model_id="org/m", model_revision="abc", port=7000)
    assert adapters.launch_args(runtime) == ["--weights", "org/m", "--listen-port", "7000", "--shards", "1"]
    assert adapters.launch_env(runtime) == {"TOY_REVISION": "abc"}
    assert (adapters.model_info_path(runtime), adapters.response_field(runtime)) == ("/about", "output")
    assert adapters.served_model(runtime, {"weights": "org/m"}) == (["org/m"], None)
    container = {"args": adapters.launch_args(runtime), "env": [{"name": "TOY_REVISION", "value": "abc"}]}
    assert adapters.launched_revision(runtime, container) == "abc"
    assert adapters.request_path(runtime) == "/infer"
