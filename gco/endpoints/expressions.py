"""A small builder for DynamoDB condition and update expressions with safe placeholders.

Attribute names (Region names, label keys with dots and slashes) always go through `#n`
placeholders and values through `:v` placeholders, so no user string reaches the grammar.
Every condition clause carries a label (`status.lifecycle`): docs/fencing.md says what each
one stops, error logs can name it, and the mutation check drops one label at a time.
"""

from __future__ import annotations

from typing import Any

from gco.endpoints.codec import to_attribute


class Expression:
    """Collects placeholders, SET clauses and AND-ed, labelled conditions for one request."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self._name_ids: dict[str, str] = {}
        self.values: dict[str, Any] = {}
        self.conditions: list[tuple[str, str]] = []
        self.assignments: list[str] = []

    def path(self, *segments: str) -> str:
        """`#n0.#n1` for the attribute path `segments`."""
        parts = []
        for segment in segments:
            placeholder = self._name_ids.get(segment)
            if placeholder is None:
                placeholder = f"#n{len(self._name_ids)}"
                self._name_ids[segment] = placeholder
                self.names[placeholder] = segment
            parts.append(placeholder)
        return ".".join(parts)

    def value(self, value: Any, field: str = "value") -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = to_attribute(value, field)
        return placeholder

    def require(self, label: str, condition: str) -> None:
        self.conditions.append((label, condition))

    def equals(self, label: str, value: Any, *segments: str) -> None:
        self.require(label, f"{self.path(*segments)} = {self.value(value)}")

    def differs(self, label: str, value: Any, *segments: str) -> None:
        self.require(label, f"{self.path(*segments)} <> {self.value(value)}")

    def exists(self, label: str, *segments: str) -> None:
        self.require(label, f"attribute_exists({self.path(*segments)})")

    def missing(self, label: str, *segments: str) -> None:
        self.require(label, f"attribute_not_exists({self.path(*segments)})")

    def contains(self, label: str, item: Any, *segments: str) -> None:
        self.require(label, f"contains({self.path(*segments)}, {self.value(item)})")

    def set(self, value: Any, *segments: str) -> None:
        self.assignments.append(f"{self.path(*segments)} = {self.value(value, '.'.join(segments))}")

    def set_expression(self, expression: str, *segments: str) -> None:
        self.assignments.append(f"{self.path(*segments)} = {expression}")

    @property
    def labels(self) -> list[str]:
        return [label for label, _ in self.conditions]

    def request(self) -> dict[str, Any]:
        """Keyword arguments for put_item / update_item / delete_item."""
        arguments: dict[str, Any] = {}
        if self.conditions:
            arguments["ConditionExpression"] = " AND ".join(f"({c})" for _, c in self.conditions)
        if self.assignments:
            arguments["UpdateExpression"] = "SET " + ", ".join(self.assignments)
        used = " ".join([arguments.get("ConditionExpression", ""), arguments.get("UpdateExpression", "")])
        # A clause left out (the mutation check) must not leave unused placeholders behind.
        names = {key: name for key, name in self.names.items() if _used(key, used)}
        values = {key: value for key, value in self.values.items() if _used(key, used)}
        if names:
            arguments["ExpressionAttributeNames"] = names
        if values:
            arguments["ExpressionAttributeValues"] = values
        return arguments


def _used(placeholder: str, text: str) -> bool:
    """Whether `placeholder` (e.g. `#n1`) occurs in `text` as a whole token (not `#n10`)."""
    start = text.find(placeholder)
    while start != -1:
        end = start + len(placeholder)
        if end == len(text) or not text[end].isdigit():
            return True
        start = text.find(placeholder, end)
    return False
