"""Splitting argument dumps at top-level separators only, so that nested values stay whole."""

from __future__ import annotations

from gco.bench.analysis.logrules.syntax import (
    json_object,
    pairs,
    python_dict,
    split_top_level,
    strip_call,
    unquote,
)


def test_commas_inside_brackets_and_quotes_belong_to_the_value() -> None:
    body = "a=X(b='1, 2', c=[3, 4]), d={\"e\":[5,6]}, f='g,h', i=None"
    assert split_top_level(body) == ["a=X(b='1, 2', c=[3, 4])", 'd={"e":[5,6]}', "f='g,h'", "i=None"]
    assert pairs(body, "=") == {"a": "X(b='1, 2', c=[3, 4])", "d": '{"e":[5,6]}', "f": "g,h", "i": "None"}


def test_a_body_cut_short_yields_what_it_holds() -> None:
    assert pairs("model='m', tokenizer='", "=") == {"model": "m", "tokenizer": "'"}
    assert pairs("a=1, b=Config(x=1, y", "=") == {"a": "1", "b": "Config(x=1, y"}


def test_pretty_printed_rust_values_read_as_on_one_line() -> None:
    body = 'revision: Some(\n        "checkpoint-3773",\n    ),\n    port: 80,\n    origins: [],'
    assert pairs(" ".join(body.splitlines()), ":") == {
        "revision": 'Some("checkpoint-3773")',
        "port": "80",
        "origins": "[]",
    }


def test_python_dict_repr_and_helpers() -> None:
    assert python_dict("{'model': 'm', 'lora': ['a', 'b'], 'eager': True}") == {
        "model": "m",
        "lora": "['a', 'b']",
        "eager": "True",
    }
    assert unquote("'a'") == "a" and unquote("'a' + 'b'") == "'a' + 'b'"
    assert json_object('{"level":3}') == {"level": 3}
    assert json_object("[1]") is None and json_object("nope") is None
    assert strip_call("a=1, b=C(x)") == "a=1, b=C(x)"
    assert strip_call("a=1, b=C(x))") == "a=1, b=C(x)"
