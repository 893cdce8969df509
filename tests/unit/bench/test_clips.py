"""Clip sets and the clip client's pure parts: errors naming the line, digest, warm-up, per-shape stats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gco.bench.clients.clip import shape_stats, warmup_clips
from gco.bench.clients.clips import clip_digest, load_clips, shapes
from gco.bench.clients.records import ClipRecord
from gco.bench.errors import BenchInputError


def _write(tmp_path: Path, *items: object) -> Path:
    path = tmp_path / "clips.jsonl"
    path.write_text("\n".join(item if isinstance(item, str) else json.dumps(item) for item in items) + "\n")
    return path


def _clip(shape: str, prompt: str = "a cat") -> dict[str, object]:
    return {"path": "/v1/videos", "body": {"prompt": prompt, "size": shape}, "shape": shape}


def test_a_clip_set_loads_in_order_with_its_shapes(tmp_path: Path) -> None:
    clips = load_clips(_write(tmp_path, _clip("small"), "", _clip("large"), _clip("small", "a dog")))
    assert [c.index for c in clips] == [0, 1, 2]
    assert shapes(clips) == ["small", "large"]
    assert [c.body["prompt"] for c in warmup_clips(clips, 3)] == [
        "a cat",
        "a dog",
        "a cat",
        "a cat",
        "a cat",
        "a cat",
    ]
    assert clip_digest(clips) != clip_digest([*clips[:2], clips[2].model_copy(update={"body": {"x": 1}})])
    assert clip_digest(clips) == clip_digest(
        load_clips(_write(tmp_path, _clip("small"), _clip("large"), _clip("small", "a dog")))
    )


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ("{nope", "line 1: not valid JSON"),
        ("[1]", "line 1: must be a JSON object"),
        ({**_clip("s"), "index": 3}, "line 1: must be a JSON object of path, body, shape"),
        ({"path": "/v1/videos", "body": {}}, "line 1: shape: Field required"),
        ({**_clip("s"), "path": "v1/videos"}, "line 1: path: Value error, must be an absolute request path"),
        ({**_clip("s"), "shape": "all"}, "line 1: shape: Value error, must be trimmed and not 'all'"),
        ({**_clip("s"), "body": "text"}, "line 1: body: Input should be a valid dictionary"),
        ({**_clip("s"), "extra": 1}, "line 1: extra: Extra inputs are not permitted"),
    ],
)
def test_a_bad_clip_is_refused_naming_its_line(tmp_path: Path, item: object, says: str) -> None:
    with pytest.raises(BenchInputError) as caught:
        load_clips(_write(tmp_path, item))
    assert caught.value.field == "--clips"
    assert says in caught.value.message


def test_empty_or_missing_clip_sets_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(BenchInputError, match="holds no clips"):
        load_clips(empty)
    with pytest.raises(BenchInputError, match="cannot read") as caught:
        load_clips(tmp_path / "absent.jsonl", "--prompts")
    assert caught.value.field == "--prompts"


def test_shape_stats_median_and_clips_per_minute_count_failed_time() -> None:
    records = [
        ClipRecord(index=0, shape="a", sent_s=0, ok=True, status=200, e2e_s=1.0, bytes=9),
        ClipRecord(index=1, shape="a", sent_s=1, ok=True, status=200, e2e_s=3.0, bytes=9),
        ClipRecord(index=2, shape="b", sent_s=4, ok=False, status=500, error="HTTP 500", e2e_s=2.0),
        ClipRecord(index=3, shape="b", sent_s=6, ok=True, status=200, e2e_s=2.0, bytes=9),
    ]
    stats, failed = shape_stats(records)
    assert stats["a"] == {"clips": 2.0, "e2e_ms": 2000.0, "clips_per_min": 30.0}
    assert stats["b"] == {"clips": 1.0, "e2e_ms": 2000.0, "clips_per_min": 15.0}
    assert stats["all"]["clips_per_min"] == pytest.approx(60 * 3 / 8)
    assert failed == {"all": 1, "a": 0, "b": 1}
    only_failed, _ = shape_stats(records[2:3])
    assert only_failed["b"] == {"clips": 0.0}
