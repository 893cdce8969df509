"""Clip sets for `bench clip`: JSONL of `{path, body, shape}`, one whole-clip request a line, and a digest.

A video engine is timed by whole clips, not token streams: each clip is one POST of `body` to `path`, and
`shape` (for example a resolution and length) is the group its timings are reported under.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gco.bench.errors import BenchInputError
from gco.errors import GcoInputError
from gco.inputs import input_files

MAX_CLIPS = 100_000
CLIPS_FIELD = "--clips"


class Clip(BaseModel):
    """One clip request: where it goes, what it sends, and the shape its timing is grouped under."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int = 0
    path: str = Field(min_length=1)
    body: dict[str, Any]
    shape: str = Field(min_length=1, max_length=100)

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/") or any(c.isspace() for c in value):
            raise ValueError("must be an absolute request path without spaces, e.g. /v1/videos")
        return value

    @field_validator("shape")
    @classmethod
    def _shape(cls, value: str) -> str:
        if value.strip() != value or value == "all":
            raise ValueError("must be trimmed and not 'all' (the name of every shape together)")
        return value


def load_clips(path: Path, field: str = CLIPS_FIELD) -> list[Clip]:
    """Read a clip set (one JSON object per line).

    Raises:
        BenchInputError: unreadable, empty, too large, or a line that is not a clip (names the line).
    """
    try:  # a regular file only: a FIFO would block the read forever
        raw = input_files.read_bounded(path, field, input_files.MAX_DATA_FILE_BYTES)
    except GcoInputError as error:
        raise BenchInputError(field, error.message) from None
    clips: list[Clip] = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        if len(clips) >= MAX_CLIPS:
            raise BenchInputError(field, f"at most {MAX_CLIPS} clips")
        try:
            item = json.loads(line)
            if not isinstance(item, dict) or "index" in item:
                raise BenchInputError(
                    field, f"{path} line {number}: must be a JSON object of path, body, shape"
                )
            clips.append(Clip.model_validate({**item, "index": len(clips)}))
        except json.JSONDecodeError as error:
            raise BenchInputError(field, f"{path} line {number}: not valid JSON ({error.msg})") from None
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "line"
            raise BenchInputError(field, f"{path} line {number}: {where}: {first['msg']}") from None
    if not clips:
        raise BenchInputError(field, f"{path} holds no clips")
    return clips


def clip_digest(clips: Sequence[Clip]) -> str:
    """sha256 over the clips in order (path, canonical body, shape): the clip set's identity."""
    digest = hashlib.sha256()
    for clip in clips:
        canonical = json.dumps([clip.path, clip.body, clip.shape], sort_keys=True, separators=(",", ":"))
        digest.update(canonical.encode("utf-8") + b"\x00")
    return digest.hexdigest()


def shapes(clips: Sequence[Clip]) -> list[str]:
    """The distinct shapes in first-seen order."""
    return list(dict.fromkeys(clip.shape for clip in clips))
