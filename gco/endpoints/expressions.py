"""A small builder for DynamoDB condition and update expressions with safe placeholders.

Attribute names (Region names, label keys with dots and slashes) always go through `#n`
placeholders and values through `:v` placeholders, so no user string reaches the grammar.
"""

from __future__ import annotations

from typing import Any

from gco.endpoints.codec import to_attribute


class Expression:
    """Collects placeholders, SET clauses and AND-ed conditions for one request."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self._name_ids: dict[str, str] = {}
        self.values: dict[str, Any] = {}
        self.conditions: list[str] = []
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

    def require(self, condition: str) -> None:
        self.conditions.append(condition)

    def equals(self, value: Any, *segments: str) -> None:
        self.require(f"{self.path(*segments)} = {self.value(value)}")

    def exists(self, *segments: str) -> None:
        self.require(f"attribute_exists({self.path(*segments)})")

    def missing(self, *segments: str) -> None:
        self.require(f"attribute_not_exists({self.path(*segments)})")

    def set(self, value: Any, *segments: str) -> None:
        self.assignments.append(f"{self.path(*segments)} = {self.value(value, '.'.join(segments))}")

    def set_expression(self, expression: str, *segments: str) -> None:
        self.assignments.append(f"{self.path(*segments)} = {expression}")

    def request(self) -> dict[str, Any]:
        """Keyword arguments for put_item / update_item / delete_item."""
        arguments: dict[str, Any] = {}
        if self.conditions:
            arguments["ConditionExpression"] = " AND ".join(f"({c})" for c in self.conditions)
        if self.assignments:
            arguments["UpdateExpression"] = "SET " + ", ".join(self.assignments)
        if self.names:
            arguments["ExpressionAttributeNames"] = dict(self.names)
        if self.values:
            arguments["ExpressionAttributeValues"] = dict(self.values)
        return arguments
