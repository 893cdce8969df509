"""The one YAML reader (`gco.inputs.strict_yaml`): YAML 1.2 core schema rules, and the refusals the
flags make."""

from __future__ import annotations

from typing import Any

import pytest

from gco.errors import GcoInputError
from gco.inputs import strict_yaml
from gco.inputs.strict_json import MAX_DEPTH


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("replicas: 10", 10),
        ("replicas: -3", -3),
        ("replicas: +3", 3),
        ("replicas: 0", 0),
        ("replicas: 0x10", 16),
        ("replicas: 0o17", 15),
        ("replicas: 1:30", "1:30"),  # YAML 1.1's sexagesimal 90
        ("replicas: '010'", "010"),
        ("ratio: 1.5", 1.5),
        ("ratio: .5", 0.5),
        ("ratio: 1e3", 1000.0),
        ("flag: yes", "yes"),
        ("flag: no", "no"),
        ("flag: on", "on"),
        ("flag: off", "off"),
        ("flag: y", "y"),
        ("flag: true", True),
        ("flag: FALSE", False),
        ("day: 2026-01-01", "2026-01-01"),  # YAML 1.1's timestamp
        ("none: ~", None),
        ("none: null", None),
        ("none:", None),
    ],
)
def test_plain_scalars_resolve_by_the_yaml_1_2_core_schema(text: str, value: Any) -> None:
    (loaded,) = strict_yaml.loads(text, "--spec").values()
    assert loaded == value and type(loaded) is type(value)


def test_merge_keys_are_plain_keys() -> None:
    assert strict_yaml.loads("<<: {a: 1}", "--spec") == {"<<": {"a": 1}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("replicas: 010", "'010' at line 1 has a leading zero"),
        ("replicas: -007", "'-007' at line 1 has a leading zero"),
        ("ratio: .inf", "'.inf' at line 1 is not a finite number"),
        ("ratio: -.Inf", "is not a finite number"),
        ("ratio: .nan", "is not a finite number"),
        ("n: " + "9" * 41, "an integer of 41 digits at line 1 (at most 40)"),
        ("a: 1\nb: 2\na: 3\n", "duplicate key 'a' at line 3"),
        ("? [1]\n: 2\n", "a mapping key at line 1 is not a string"),
        ("a: &x 1\nb: *x\n", "anchors or aliases"),
        ("a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nests deeper than {MAX_DEPTH}"),
        ("a: [", "is not valid YAML"),
    ],
)
def test_what_the_flags_refuse_is_refused_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(GcoInputError) as caught:
        strict_yaml.loads(text, "--spec", "spec.yaml")
    assert caught.value.field == "--spec"
    assert message in caught.value.message


def test_pyyaml_s_own_resolver_is_left_as_it_was() -> None:
    import yaml

    assert yaml.safe_load("a: 010\nb: yes") == {"a": 8, "b": True}
    assert strict_yaml.loads("b: yes", "f") == {"b": "yes"}
