"""Prompt sets: loading (JSONL, JSON list or plain text), length buckets, digest, salted warm-up prompts.

Buckets use whitespace word counts so that no tokenizer is needed; edges are inclusive upper bounds.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import uuid
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gco.bench.errors import BenchInputError
from gco.errors import GcoInputError
from gco.inputs import input_files

DEFAULT_EDGES = (128, 512, 2048)
MAX_PROMPTS = 100_000


class Prompt(BaseModel):
    """One prompt and its length bucket."""

    model_config = ConfigDict(frozen=True)

    index: int
    text: str
    words: int
    bucket: str


def bucket_name(words: int, edges: Sequence[int] = DEFAULT_EDGES) -> str:
    """The bucket label of a prompt length, e.g. `0-128`, `129-512`, `>2048`."""
    low = 0
    for edge in edges:
        if words <= edge:
            return f"{low}-{edge}"
        low = edge + 1
    return f">{edges[-1]}" if edges else "all"


def increasing(edges: Sequence[int]) -> str | None:
    """What is wrong with bucket edges, or None: each must be above the one before it (the buckets
    `0-e1`, `e1+1-e2`, ... are empty or overlap otherwise)."""
    for before, edge in itertools.pairwise(edges):
        if edge <= before:
            return f"each edge must be above the one before it ({before} then {edge})"
    return None


def _texts(path: Path) -> list[str]:
    try:  # a regular file only: a FIFO would block the read forever
        raw = input_files.read_bounded(path, "--prompts", input_files.MAX_DATA_FILE_BYTES)
    except GcoInputError as error:
        raise BenchInputError("--prompts", error.message) from None
    if path.suffix.lower() == ".txt":
        return [line for line in raw.splitlines() if line.strip()]
    try:
        if path.suffix.lower() == ".json":
            items = json.loads(raw)
            if not isinstance(items, list):
                raise BenchInputError("--prompts", "a .json prompt file must hold a list")
        else:
            items = [json.loads(line) for line in raw.splitlines() if line.strip()]
    except json.JSONDecodeError as error:
        raise BenchInputError(
            "--prompts", f"{path}: not valid JSON ({error.msg}, line {error.lineno})"
        ) from None
    texts = []
    for number, item in enumerate(items):
        text = item if isinstance(item, str) else item.get("prompt") if isinstance(item, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise BenchInputError("--prompts", f"item {number} has no non-empty 'prompt' string")
        texts.append(text)
    return texts


def load_prompts(path: Path, edges: Sequence[int] = DEFAULT_EDGES) -> list[Prompt]:
    """Read and bucket a prompt set.

    Raises:
        BenchInputError: unreadable, empty, too large, or an item without a prompt (field `--prompts`).
    """
    texts = _texts(path)
    if not texts:
        raise BenchInputError("--prompts", f"{path} holds no prompts")
    if len(texts) > MAX_PROMPTS:
        raise BenchInputError("--prompts", f"at most {MAX_PROMPTS} prompts")
    return [
        Prompt(index=i, text=t, words=len(t.split()), bucket=bucket_name(len(t.split()), edges))
        for i, t in enumerate(texts)
    ]


def prompt_digest(prompts: Sequence[Prompt]) -> str:
    """sha256 over the prompt texts in order: the prompt set's identity."""
    digest = hashlib.sha256()
    for prompt in prompts:
        digest.update(prompt.text.encode("utf-8") + b"\x00")
    return digest.hexdigest()


def salted(text: str, salt: str | None = None) -> str:
    """A warm-up prompt with a unique prefix, so its blocks never match a benchmark prompt's."""
    return f"[warmup {salt or uuid.uuid4().hex}] {text}"
