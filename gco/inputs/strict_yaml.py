"""YAML as the YAML 1.2 core schema reads it, the one YAML reader of every file gco is given.

PyYAML's `safe_load` implements YAML 1.1, whose implicit types surprise anyone who writes YAML 1.2
(what every current parser and the Kubernetes tooling read): `replicas: 010` is octal 8, `1:30`
is the sexagesimal 90, `yes`/`no`/`on`/`off` are booleans and `2026-01-01` a date. Here plain
scalars resolve by the core schema (YAML 1.2.2, section 10.3.2, "Tag Resolution"):

- null: `null`, `Null`, `NULL`, `~` and the empty scalar;
- bool: `true`, `True`, `TRUE`, `false`, `False`, `FALSE` (never `yes`, `no`, `on`, `off`);
- int: `[-+]?[0-9]+` in base 10, `0o[0-7]+`, `0x[0-9a-fA-F]+`;
- float: `[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?`, `.inf`, `.nan`;
- everything else a string (`1:30`, `2026-01-01`, `yes`).

Two refusals go beyond the schema, so a file refuses what the same value given as a flag is
refused for (`gco.cli.common.StrictInt`, `StrictFloat`) and what `gco.inputs.strict_json` refuses:
a decimal integer with a leading zero (`010`: YAML 1.1 readers take it as 8, YAML 1.2 as 10;
a value read two ways is refused, quote it for a string) or of more than
`strict_json.MAX_INT_DIGITS` digits, and `.inf`/`.nan`. Also refused: a key given twice (naming
it and its line), anchors and aliases (a few bytes can expand into gigabytes), and nesting deeper
than `strict_json.MAX_DEPTH` (checked on the event stream before any recursive constructor).
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from gco.errors import GcoInputError
from gco.inputs.strict_json import MAX_DEPTH, MAX_INT_DIGITS

NULL_TAG, BOOL_TAG = "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool"
INT_TAG, FLOAT_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"

_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_LEADING_ZERO = re.compile(r"[-+]?0[0-9]+")


class CoreResolver(BaseResolver):
    """The YAML 1.2 core schema's implicit tags, and none of YAML 1.1's (timestamps, merge keys,
    sexagesimal numbers, `yes`/`no`)."""

    yaml_implicit_resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]] = {}  # noqa: RUF012 (PyYAML's API)


CoreResolver.add_implicit_resolver(NULL_TAG, _NULL, ["~", "n", "N", ""])
CoreResolver.add_implicit_resolver(BOOL_TAG, _BOOL, list("tTfF"))
CoreResolver.add_implicit_resolver(INT_TAG, _INT, list("-+0123456789"))
CoreResolver.add_implicit_resolver(FLOAT_TAG, _FLOAT, list("-+.0123456789"))
# A scalar none of these match whole (`1:30`, `yes`, `-`) is a string.


class _CoreConstructor(SafeConstructor):
    """Ints and floats built by the core schema's rules, duplicate keys refused."""

    field = "file"

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                duplicate = key in seen
            except TypeError:
                raise GcoInputError(self.field, f"a mapping key at line {line} is not a string") from None
            if duplicate:
                raise GcoInputError(self.field, f"duplicate key {str(key)[:64]!r} at line {line}")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_core_int(self, node: yaml.ScalarNode) -> int:
        text = str(self.construct_scalar(node))
        line = node.start_mark.line + 1
        if _LEADING_ZERO.fullmatch(text):
            raise GcoInputError(
                self.field,
                f"{text!r} at line {line} has a leading zero (YAML 1.1 reads it as octal, YAML 1.2 as "
                "decimal): write the number without it, or quote it for a string",
            )
        digits = text.lstrip("+-")
        if len(digits) > MAX_INT_DIGITS:
            raise GcoInputError(
                self.field, f"an integer of {len(digits)} digits at line {line} (at most {MAX_INT_DIGITS})"
            )
        if digits.startswith(("0o", "0x")):
            return int(digits[2:], 8 if digits[1] == "o" else 16)
        return int(text, 10)

    def construct_core_float(self, node: yaml.ScalarNode) -> float:
        text = str(self.construct_scalar(node))
        if "inf" in text.lower() or "nan" in text.lower():
            line = node.start_mark.line + 1
            raise GcoInputError(self.field, f"{text!r} at line {line} is not a finite number")
        return float(text)


_CoreConstructor.yaml_constructors = {
    **SafeConstructor.yaml_constructors,
    INT_TAG: _CoreConstructor.construct_core_int,
    FLOAT_TAG: _CoreConstructor.construct_core_float,
}


def _loader(field: str) -> type[Any]:
    """A loader class whose refusals name `field` (PyYAML builds the loader from its class)."""

    class Loader(Reader, Scanner, Parser, Composer, _CoreConstructor, CoreResolver):
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)
            Composer.__init__(self)
            _CoreConstructor.__init__(self)
            CoreResolver.__init__(self)

    Loader.field = field
    return Loader


def _check_events(text: str, field: str, what: str) -> None:
    """Depth and anchors from the event stream (iterative: no recursion on deep input)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise GcoInputError(field, f"{what} uses YAML anchors or aliases; write the values out")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise GcoInputError(field, f"{what} nests deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def loads(text: str, field: str, what: str = "it") -> Any:
    """Parse one YAML document by the YAML 1.2 core schema, strictly.

    Parameters:
        text: the document.
        field: the option or setting every refusal names (`--spec`, `SETTINGS`, `--manifest`).
        what: how a message names the document (its path).

    Returns:
        The document's value: dicts, lists, str, int, float, bool or None.

    Raises:
        GcoInputError: on `field`, for invalid YAML, a duplicate key, an anchor or alias, nesting
            deeper than `MAX_DEPTH`, an integer with a leading zero or of more than
            `MAX_INT_DIGITS` digits, or `.inf`/`.nan`.
    """
    try:
        _check_events(text, field, what)
        return yaml.load(text, Loader=_loader(field))  # noqa: S506 - SafeConstructor, core resolver
    except yaml.YAMLError as error:
        detail = str(error).splitlines()[0]
        raise GcoInputError(field, f"{what} is not valid YAML: {detail}") from None
