"""Reading a spec file as a hostile one would be written: bounded, strict, shallow.

- At most `MAX_SPEC_FILE_BYTES` are read (`--spec /dev/zero` stops there, it is not slurped).
- A key given twice in one mapping is refused, naming the key (JSON and YAML would both let
  the last one win silently); JSON is read by `gco.strict_json` (NaN and huge integers refused).
- Nesting deeper than `MAX_DEPTH` is refused before any recursive parser sees it (deep JSON
  or YAML would otherwise end in a RecursionError traceback).
- YAML anchors and aliases are refused: a spec needs none, and they let a few bytes expand
  into gigabytes ("billion laughs").

Every refusal is one `InvalidSpecError` on the field `--spec`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gco import strict_json
from gco.endpoints.errors import InvalidSpecError
from gco.errors import GcoInputError
from gco.strict_json import MAX_DEPTH as MAX_DEPTH  # noqa: PLC0414 (re-exported: the tests' limit)

MAX_SPEC_FILE_BYTES = 256 * 1024
FIELD = "--spec"


def shown(path: Path) -> str:
    """The path for a one-line message, escaped when it holds control characters."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def read_bounded(path: Path) -> str:
    """The file's text, refusing it when it holds more than `MAX_SPEC_FILE_BYTES`.

    Raises:
        InvalidSpecError: the file cannot be read, is larger than `MAX_SPEC_FILE_BYTES`, or is not UTF-8.
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SPEC_FILE_BYTES + 1)
    except OSError as error:
        raise InvalidSpecError(FIELD, f"cannot read {shown(path)}: {error.strerror or error}") from None
    except ValueError as error:  # a NUL byte in the path
        raise InvalidSpecError(FIELD, f"cannot read {shown(path)}: {error}") from None
    if len(data) > MAX_SPEC_FILE_BYTES:
        raise InvalidSpecError(FIELD, f"{shown(path)} is larger than {MAX_SPEC_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidSpecError(FIELD, f"cannot read {shown(path)}: not UTF-8 ({error.reason})") from None


def _parse_json(text: str, path: Path) -> Any:
    """Strict JSON (`gco.strict_json`): duplicate keys, NaN, huge integers and deep nesting refused."""
    try:
        return strict_json.loads(text, FIELD, shown(path))
    except GcoInputError as error:
        raise InvalidSpecError(FIELD, error.message) from None


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (naming them and their line)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:
                raise InvalidSpecError(
                    FIELD, f"a mapping key at line {key_node.start_mark.line + 1} is not a string"
                ) from None
            if duplicate:
                shown = str(key)[:64]
                raise InvalidSpecError(
                    FIELD, f"duplicate key {shown!r} at line {key_node.start_mark.line + 1}"
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _check_yaml_events(text: str, path: Path) -> None:
    """Depth and aliases from the event stream (iterative: no recursion on deep input)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise InvalidSpecError(FIELD, f"{shown(path)} uses YAML anchors or aliases; write the values out")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise InvalidSpecError(FIELD, f"{shown(path)} nests deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _parse_yaml(text: str, path: Path) -> Any:
    try:
        _check_yaml_events(text, path)
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as error:
        detail = str(error).splitlines()[0]
        raise InvalidSpecError(FIELD, f"{shown(path)} is not valid YAML: {detail}") from None
    except ValueError as error:  # an integer of more than 4,300 digits (`int()`'s own limit)
        raise InvalidSpecError(FIELD, f"{shown(path)}: {str(error)[:120]}") from None


def load_spec_file(path: Path) -> dict[str, Any]:
    """Read a whole spec from a JSON (`.json`) or YAML file.

    Raises:
        InvalidSpecError: unreadable, too large, unparsable, duplicate keys, too deep, or not a
            mapping (field `--spec`).
    """
    text = read_bounded(path)
    data = _parse_json(text, path) if path.suffix.lower() == ".json" else _parse_yaml(text, path)
    if not isinstance(data, dict):
        raise InvalidSpecError(FIELD, f"{shown(path)} must hold a mapping of spec fields")
    return data
