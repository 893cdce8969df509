"""Prompt sets: formats, buckets by length, digest, salted warm-up prompts, errors naming --prompts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gco.bench.clients.prompts import bucket_name, load_prompts, prompt_digest, salted
from gco.bench.errors import BenchInputError


def test_jsonl_json_and_text_formats(tmp_path: Path) -> None:
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"prompt": "a b c"}\n\n{"prompt": "' + "w " * 200 + '"}\n', encoding="utf-8")
    prompts = load_prompts(jsonl)
    assert [p.bucket for p in prompts] == ["0-128", "129-512"]
    assert prompts[0].words == 3
    listing = tmp_path / "p.json"
    listing.write_text(json.dumps(["one", {"prompt": "two"}]), encoding="utf-8")
    assert [p.text for p in load_prompts(listing)] == ["one", "two"]
    text = tmp_path / "p.txt"
    text.write_text("first\n\nsecond\n", encoding="utf-8")
    assert len(load_prompts(text, [1])) == 2


def test_bucket_names() -> None:
    assert bucket_name(5) == "0-128"
    assert bucket_name(5000) == ">2048"
    assert bucket_name(3, []) == "all"


@pytest.mark.parametrize(
    ("name", "body", "message"),
    [
        ("e.jsonl", "", "no prompts"),
        ("b.jsonl", "{bad", "not valid JSON"),
        ("n.jsonl", '{"text": "x"}', "no non-empty 'prompt'"),
        ("d.json", '{"prompt": "x"}', "must hold a list"),
    ],
)
def test_bad_prompt_files_name_the_field(tmp_path: Path, name: str, body: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    with pytest.raises(BenchInputError, match=message) as caught:
        load_prompts(path)
    assert caught.value.field == "--prompts"
    with pytest.raises(BenchInputError, match="cannot read"):
        load_prompts(tmp_path / "missing.jsonl")


def test_digest_and_salt(tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text("x\ny\n", encoding="utf-8")
    prompts = load_prompts(path)
    assert prompt_digest(prompts) == prompt_digest(load_prompts(path))
    assert prompt_digest(prompts) != prompt_digest(prompts[:1])
    assert salted("q", "s1") == "[warmup s1] q"
    assert salted("q") != salted("q")
