"""The run manifest: JSON and YAML, errors naming the field, engine selection, secrets, JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gco.bench.errors import BenchInputError
from gco.bench.rounds.manifest import load_manifest, manifest_schema


def _manifest(**engine: Any) -> dict[str, Any]:
    base = {"label": "vllm", "argv": ["serve"], "port": 8000, "model": {"id": "m"}}
    return {"engines": [{**base, **engine}]}


def _write(tmp_path: Path, data: Any, name: str = "m.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_loads_json_and_yaml_with_defaults(tmp_path: Path) -> None:
    manifest = load_manifest(_write(tmp_path, _manifest(env={"A": "1", "HOME": None})))
    engine = manifest.engines[0]
    assert engine.ready_check.path == "/health"
    assert engine.ready_check.timeout_s is None  # the run's startup timeout applies
    assert manifest.startup_timeout_s == 1200
    assert manifest.stop_timeout_s == 30
    assert manifest.gpu_memory_tolerance_mib == 512
    assert manifest.workload.warmup_requests == 2
    yaml_path = tmp_path / "m.yaml"
    yaml_path.write_text("engines:\n- label: a\n  argv: [x]\n  port: 1\n  model: {id: m}\n", encoding="utf-8")
    assert load_manifest(yaml_path).engines[0].label == "a"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (_manifest(port=0), "manifest.engines.0.port"),
        (_manifest(label="Bad Label"), "manifest.engines.0.label"),
        (_manifest(argv=[]), "manifest.engines.0.argv"),
        (_manifest(surprise=1), "manifest.engines.0.surprise"),
        ({"engines": []}, "manifest.engines"),
        ({"engines": [_manifest()["engines"][0]] * 2}, "manifest"),
        ([1, 2], "--manifest"),
    ],
)
def test_bad_values_name_the_field(tmp_path: Path, data: Any, field: str) -> None:
    with pytest.raises(BenchInputError) as caught:
        load_manifest(_write(tmp_path, data))
    assert caught.value.field == field
    assert caught.value.exit_code == 2


def test_unreadable_and_unparsable(tmp_path: Path) -> None:
    with pytest.raises(BenchInputError, match="cannot read"):
        load_manifest(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope", encoding="utf-8")
    with pytest.raises(BenchInputError, match="is not valid JSON"):
        load_manifest(bad)


def test_select_and_secret_names(tmp_path: Path) -> None:
    data = _manifest(
        env={"HF_TOKEN": "hf_" + "x" * 30, "PLAIN": "sk-" + "a" * 24, "OK": "1", "API_KEY": None}
    )
    data["engines"].append({"label": "tgi", "argv": ["t"], "port": 8080, "model": {"id": "m"}})
    manifest = load_manifest(_write(tmp_path, data))
    assert manifest.engines[0].secret_env_names() == ["HF_TOKEN", "PLAIN"]
    assert [e.label for e in manifest.select(["tgi"])] == ["tgi"]
    assert len(manifest.select(None)) == 2
    with pytest.raises(BenchInputError) as caught:
        manifest.select(["nope"])
    assert caught.value.field == "--engines"


def test_schema_accepts_a_good_manifest_and_rejects_a_bad_one() -> None:
    validator = jsonschema.Draft202012Validator(manifest_schema())
    assert not list(validator.iter_errors(_manifest()))
    assert list(validator.iter_errors(_manifest(port="x")))


def test_a_yaml_manifest_reads_by_the_yaml_1_2_core_schema(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "engines:\n- {label: vllm, argv: [serve, 'on'], port: 8000, model: {id: m}}\n", encoding="utf-8"
    )
    assert load_manifest(path).engines[0].argv == ["serve", "on"]
    path.write_text(
        "engines:\n- {label: vllm, argv: [serve, on], port: 010, model: {id: m}}\n", encoding="utf-8"
    )
    with pytest.raises(BenchInputError, match="'010' at line 2 has a leading zero"):
        load_manifest(path)
