"""The syntax of the argument dumps that engines log at start-up, read so that a nested value stays one value.

Three shapes occur in real logs (tests/fixtures/engine_logs holds copies, each naming its source):
- `key=value, key=value` — vLLM's `with config:` line, Python's `Namespace(...)` repr (vLLM up to 0.8's
  `args:` line) and SGLang's `ServerArgs(...)` dataclass repr. Values nest: `StructuredOutputsConfig(
  backend='auto', ...)`, `[LoRAModulePath(name=..., path=...), ...]`, `{"level":3,"splitting_ops":[...]}`.
- `key: value, key: value` — Rust's `Debug` of TGI's launcher `Args { ... }`, on one line before TGI 1.x
  and pretty-printed over many lines (`{:#?}`) since, where a value may itself span lines
  (`revision: Some(\\n "checkpoint-3773",\\n ),`).
- `{'key': value, ...}` — the Python dict repr of vLLM's `non-default args:` line (0.9 on).

Splitting is at top-level separators only: commas inside (), [], {} or quotes belong to the value. A body
cut short (a log excerpt, a line truncated by a terminal) yields what it holds, never an error.
"""

from __future__ import annotations

import json
import re
from typing import Any

OPEN = {"(": ")", "[": "]", "{": "}"}
CLOSE = set(OPEN.values())
QUOTES = ("'", '"')
IDENT = re.compile(r"^[A-Za-z_][\w.-]*$")


def split_top_level(body: str, sep: str = ",") -> list[str]:
    """`body` cut at each `sep` that is outside brackets and quotes; pieces stripped, empty ones dropped."""
    pieces: list[str] = []
    depth = 0
    quote: str | None = None
    start = 0
    escaped = False
    for i, char in enumerate(body):
        if quote is not None:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
        elif char in QUOTES:
            quote = char
        elif char in OPEN:
            depth += 1
        elif char in CLOSE:
            depth = max(0, depth - 1)
        elif char == sep and depth == 0:
            pieces.append(body[start:i])
            start = i + 1
    pieces.append(body[start:])
    return [piece.strip() for piece in pieces if piece.strip()]


def unquote(value: str) -> str:
    """A value without the quotes of a plain quoted string; anything else (nested, bare) as it is."""
    text = value.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in QUOTES and text[0] not in text[1:-1]:
        return text[1:-1]
    return text


def _compact(value: str, pretty: bool) -> str:
    """Runs of whitespace folded; a pretty-printed (Rust `{:#?}`) value also loses the line breaks' indent
    inside brackets and its trailing commas, so `Some(\\n "x",\\n )` reads `Some("x")` as on one line."""
    folded = " ".join(value.split())
    if not pretty:
        return folded
    folded = re.sub(r"([(\[{]) ", r"\1", folded)
    return re.sub(r",?\s*([)\]}])", r"\1", folded)


def pairs(body: str, sep: str) -> dict[str, str]:
    """Top-level `key<sep>value` items of `body` (`sep` is "=" or ":"); an item without a key is skipped."""
    out: dict[str, str] = {}
    for item in split_top_level(body):
        key, found, value = item.partition(sep)
        key = key.strip()
        if found and IDENT.match(key):
            out[key] = unquote(_compact(value, pretty=sep == ":"))
    return out


def python_dict(body: str) -> dict[str, str]:
    """The items of a dict repr `{'k': v, ...}` (braces optional), keys unquoted, values as written."""
    inner = body.strip()
    if inner.startswith("{"):
        inner = inner[1:]
    if inner.endswith("}"):
        inner = inner[:-1]
    out: dict[str, str] = {}
    for item in split_top_level(inner):
        key, found, value = item.partition(":")
        name = unquote(key)
        if found and IDENT.match(name):
            out[name] = unquote(value)
    return out


def json_object(text: str | None) -> dict[str, Any] | None:
    """A JSON object value (vLLM's compilation_config, a --kv-transfer-config), or None if it is not one."""
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def strip_call(body: str) -> str:
    """`body` without the closing parenthesis of a repr like `Namespace(...)` when it balances."""
    text = body.rstrip()
    if text.endswith(")") and text.count("(") < text.count(")"):
        return text[:-1]
    return text


def truthy(value: str | None) -> bool | None:
    """A logged boolean ("True", "true", "1"); None when absent."""
    if value is None:
        return None
    return value.strip().lower() in ("true", "1", "yes")


def positive(value: str | None) -> bool:
    """A size given as more than zero ("8", "8.0"); any other non-empty value but "None" counts as given."""
    if value is None:
        return False
    try:
        return float(value) > 0
    except ValueError:
        return value.strip() not in ("", "None")
