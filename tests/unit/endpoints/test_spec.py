"""The spec model: strict types, unknown keys refused, every bad value named by its field."""

from __future__ import annotations

import json
import math
from typing import Any, Literal, get_args, get_origin

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from gco.endpoints import InvalidSpecError, parse_spec, spec_json_schema
from gco.endpoints import spec as spec_module
from gco.endpoints.spec import EndpointSpec, field_path

DIGEST = "sha256:" + "a" * 64
BASE: dict[str, Any] = {"image": "vllm/vllm-openai:v0.6.3"}


def refuse(spec: dict[str, Any], field: str) -> str:
    with pytest.raises(InvalidSpecError) as caught:
        parse_spec(spec)
    assert caught.value.field == field, str(caught.value)
    assert "\n" not in str(caught.value)
    return caught.value.message


def test_defaults() -> None:
    spec = parse_spec(BASE)
    assert (spec.framework, spec.port, spec.replicas, spec.gpu_count, spec.health_check_path) == (
        "vllm",
        8000,
        1,
        1,
        "/health",
    )
    assert spec.accelerator == "nvidia" and spec.capacity_type == "on-demand"
    assert not spec.autoscaled
    assert spec.images() == {"image": BASE["image"]}


def test_full_spec_parses() -> None:
    spec = parse_spec(
        {
            "image": f"123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm@{DIGEST}",
            "require_digest": True,
            "framework": "sglang",
            "port": 30000,
            "replicas": 0,
            "gpu_count": 8,
            "gpu_type": "p5.48xlarge",
            "capacity_type": "spot",
            "model_id": "meta-llama/Llama-3.1-8B",
            "model_revision": "0e9e39f249a16976918f6564b8830bc894c89659",
            "model_source": "s3://models/llama/",
            "health_check_path": "/health_generate",
            "env": {"HF_HOME": "/cache"},
            "resources": {"requests": {"cpu": "500m", "memory": "4Gi"}, "limits": {"nvidia.com/gpu": "8"}},
            "command": ["python3"],
            "args": ["-m", "sglang.launch_server"],
            "extra_args": ["--tp", "8"],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "node_selector": {"eks.amazonaws.com/nodegroup": "gpu"},
            "autoscaling": {
                "enabled": True,
                "min_replicas": 0,
                "max_replicas": 4,
                "metrics": [{"type": "queue_depth", "target": 5}, {"type": "gpu", "target": 80.5}],
            },
            "canary": {"image": f"vllm@{DIGEST}", "weight": 20, "replicas": 1},
        }
    )
    assert spec.autoscaled and spec.autoscaling.metrics[1].target == 80.5
    assert set(spec.images()) == {"image", "canary.image"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"port": True}, "spec.port"),
        ({"port": "8000"}, "spec.port"),
        ({"port": 70000}, "spec.port"),
        ({"replicas": 1.0}, "spec.replicas"),
        ({"replicas": -1}, "spec.replicas"),
        ({"gpu_count": False}, "spec.gpu_count"),
        ({"framework": "triton"}, "spec.framework"),
        ({"accelerator": "tpu"}, "spec.accelerator"),
        ({"capacity_type": "reserved"}, "spec.capacity_type"),
        ({"image": "Not An Image"}, "spec.image"),
        ({"image": ""}, "spec.image"),
        ({"model_id": " padded "}, "spec.model_id"),
        ({"model_source": "https://example.com/m"}, "spec.model_source"),
        ({"health_check_path": "health"}, "spec.health_check_path"),
        ({"env": {"1BAD": "x"}}, "spec.env"),
        ({"env": {"OK": 1}}, "spec.env.OK"),
        ({"resources": {"requests": {"cpu": "lots"}}}, "spec.resources.requests"),
        ({"resources": {"limits": {"bad name!": "1"}}}, "spec.resources.limits"),
        ({"resources": {"spare": {}}}, "spec.resources.spare"),
        ({"tolerations": [{"operator": "Exists", "value": "x"}]}, "spec.tolerations[0].value"),
        (
            {"tolerations": [{"effect": "NoSchedule", "toleration_seconds": 5}]},
            "spec.tolerations[0].toleration_seconds",
        ),
        ({"node_selector": {"bad key!": "x"}}, "spec.node_selector"),
        ({"autoscaling": {"enabled": True}}, "spec.autoscaling.metrics"),
        ({"autoscaling": {"min_replicas": 3, "max_replicas": 2}}, "spec.autoscaling.min_replicas"),
        (
            {
                "autoscaling": {
                    "enabled": True,
                    "max_replicas": 2,
                    "metrics": [{"type": "cpu", "target": 101}],
                }
            },
            "spec.autoscaling.metrics[0].target",
        ),
        (
            {
                "autoscaling": {
                    "enabled": True,
                    "max_replicas": 2,
                    "metrics": [{"type": "cpu", "target": 50}, {"type": "cpu", "target": 60}],
                }
            },
            "spec.autoscaling.metrics",
        ),
        (
            {
                "autoscaling": {
                    "enabled": True,
                    "min_replicas": 0,
                    "max_replicas": 2,
                    "metrics": [{"type": "cpu", "target": 50}],
                }
            },
            "spec.autoscaling.min_replicas",
        ),
        (
            {"autoscaling": {"metrics": [{"type": "latency", "target": 1}]}},
            "spec.autoscaling.metrics[0].type",
        ),
        ({"autoscaling": {"enabled": "yes"}}, "spec.autoscaling.enabled"),
        ({"canary": {"image": "x:1", "weight": 101}}, "spec.canary.weight"),
        ({"canary": {"image": "x:1"}, "mooncake": {"proxy_image": "p:1"}}, "spec.canary"),
        ({"mooncake": {"mode": "disaggregated"}}, "spec.mooncake.proxy_image"),
        ({"mooncake": {"mode": "store", "transfer_protocol": "udp"}}, "spec.mooncake.transfer_protocol"),
        (
            {"mooncake": {"mode": "store", "store_local_buffer_size": "big"}},
            "spec.mooncake.store_local_buffer_size",
        ),
        ({"mooncake": {"mode": "both", "proxy_image": "BAD IMAGE"}}, "spec.mooncake.proxy_image"),
        ({"require_digest": True}, "spec.image"),
        ({"require_digest": True, "image": f"x@{DIGEST}", "canary": {"image": "y:1"}}, "spec.canary.image"),
        ({"accelerator": "neuron", "gpu_type": "g5"}, "spec.gpu_type"),
        ({"surprise": 1}, "spec.surprise"),
    ],
)
def test_bad_values_are_named(change: dict[str, Any], field: str) -> None:
    refuse({**BASE, **change}, field)


def test_not_a_mapping() -> None:
    with pytest.raises(InvalidSpecError, match=r"^spec: must be a mapping"):
        parse_spec(["image"])
    assert parse_spec(parse_spec(BASE)) == parse_spec(BASE)


def test_several_problems_are_counted_on_one_line() -> None:
    message = refuse({"image": "x", "port": 0, "replicas": -1}, "spec.port")
    assert "and 1 more problem" in message


def test_field_path_rendering() -> None:
    assert field_path(("autoscaling", "metrics", 0, "target"), "spec") == "spec.autoscaling.metrics[0].target"
    assert field_path((), "") == "spec"


def test_json_schema_is_the_models_contract() -> None:
    schema = spec_json_schema()
    assert schema["$schema"].endswith("2020-12/schema")
    assert schema["required"] == ["image"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(EndpointSpec.model_fields)
    json.dumps(schema)


# -- property tests: malformed input of any shape gets one InvalidSpecError naming a spec field ----

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
field_names = st.sampled_from(sorted(EndpointSpec.model_fields))


@settings(max_examples=300, deadline=None)
@given(field=field_names, value=json_values)
def test_any_value_is_accepted_or_refused_naming_the_field(field: str, value: Any) -> None:
    # A digest-pinned image, so require_digest alone cannot move the error to another field.
    spec = {"image": f"vllm/vllm-openai@{DIGEST}", field: value}
    refused: InvalidSpecError | None = None
    try:
        parsed = parse_spec(spec)
    except InvalidSpecError as error:
        refused = error
    if refused is not None:
        named = refused.field
        assert named == f"spec.{field}" or named.startswith((f"spec.{field}.", f"spec.{field}[")), (
            named,
            field,
        )
        assert "\n" not in str(refused)
        return
    dumped = parsed.model_dump(mode="json")
    if isinstance(value, float) and not math.isnan(value):
        assert dumped[field] == value


@settings(max_examples=100, deadline=None)
@given(extra=st.text(min_size=1, max_size=10).filter(lambda key: key not in EndpointSpec.model_fields))
def test_unknown_keys_are_refused(extra: str) -> None:
    plain = extra.isprintable() and "." not in extra and "[" not in extra
    refuse({**BASE, extra: 1}, f"spec.{extra}" if plain else f"spec[{extra!r}]")


@settings(max_examples=100, deadline=None)
@given(value=st.booleans())
def test_a_bool_is_never_an_int(value: bool) -> None:
    for field in ("port", "replicas", "gpu_count"):
        refuse({**BASE, field: value}, f"spec.{field}")


# Every text field of the spec's models, in a spec that is valid but for one control character there.
CONTROL_IN_TEXT = [
    ({"image": "vllm\x00"}, "spec.image"),
    ({"gpu_type": "h100\x1b", "gpu_count": 1}, "spec.gpu_type"),
    ({"model_id": "meta/llama\u202e"}, "spec.model_id"),
    ({"model_revision": "main\x07"}, "spec.model_revision"),
    ({"model_source": "s3://bucket/m\x00"}, "spec.model_source"),
    ({"health_check_path": "/health\u2028"}, "spec.health_check_path"),
    ({"env": {"TOKEN": "a\x00b"}}, "spec.env.TOKEN"),
    ({"env": {"TO\x1bKEN": "ab"}}, "spec.env['TO\\x1bKEN']"),
    ({"command": ["python", "-c\x00"]}, "spec.command[1]"),
    ({"args": ["--port\n"]}, "spec.args[0]"),
    ({"extra_args": ["--x\u200b"]}, "spec.extra_args[0]"),
    ({"node_selector": {"zone": "a\x00"}}, "spec.node_selector.zone"),
    ({"resources": {"requests": {"cpu": "1\x00"}}}, "spec.resources.requests.cpu"),
    ({"resources": {"limits": {"memory": "1Gi\n"}}}, "spec.resources.limits.memory"),
    ({"tolerations": [{"key": "gpu\x00", "operator": "Exists"}]}, "spec.tolerations[0].key"),
    ({"tolerations": [{"key": "gpu", "value": "yes\x1b"}]}, "spec.tolerations[0].value"),
    ({"canary": {"image": "vllm:2\x00"}}, "spec.canary.image"),
    (
        {"mooncake": {"mode": "store", "store_global_segment_size": "4Gi\x00"}},
        "spec.mooncake.store_global_segment_size",
    ),
    (
        {"mooncake": {"mode": "store", "store_local_buffer_size": "1Gi\u202e"}},
        "spec.mooncake.store_local_buffer_size",
    ),
    ({"mooncake": {"proxy_image": "proxy:1\x00"}}, "spec.mooncake.proxy_image"),
    ({"residency": {"enabled": True, "regions": ["us-east-1\x00"]}}, "spec.residency.regions[0]"),
]


# Fields with a pattern: the pattern refuses the character first, with its own message.
PATTERNED = {"spec.gpu_type", "spec.model_revision", "spec.residency.regions[0]"}


@pytest.mark.parametrize(("change", "field"), CONTROL_IN_TEXT)
def test_a_control_character_in_any_text_field_is_refused_naming_it(
    change: dict[str, Any], field: str
) -> None:
    message = refuse({**BASE, **change}, field)
    assert field in PATTERNED or message == "holds a control or invisible character"


def holds_text(annotation: Any) -> bool:
    """Whether a value of this type can hold a str anywhere (a literal's values are the model's own)."""
    if annotation is str:
        return True
    if get_origin(annotation) is Literal:
        return False
    return any(holds_text(argument) for argument in get_args(annotation))


def spec_models() -> list[type[BaseModel]]:
    """Every model of the spec (the subclasses of its strict base, at any depth)."""
    found: list[type[BaseModel]] = [spec_module._Strict]
    for model in found:
        found.extend(model.__subclasses__())
    return found[1:]


def test_every_text_field_is_checked_for_control_characters() -> None:
    text_fields = {
        (model.__name__, name)
        for model in spec_models()
        for name, info in model.model_fields.items()
        if holds_text(info.annotation)
    }
    assert {name for _, name in text_fields} == set(spec_module.TEXT_FIELDS)
    # The check's own list names no field that cannot hold text, in any model.
    for model in spec_models():
        for name in set(spec_module.TEXT_FIELDS) & set(model.model_fields):
            assert (model.__name__, name) in text_fields
    assert len(spec_models()) == 10
