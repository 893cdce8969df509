"""Fixtures over one synthesis of the whole app (home + two Regions + runner, all five nag packs)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cdk.synth_cache import HOME, OTHER, ROOT, Synthesized, cdk_json_config, synthesize

__all__ = ["HOME", "OTHER", "ROOT", "Synthesized", "cdk_json_config", "iam_statements"]


@pytest.fixture(scope="session")
def synthesized() -> Synthesized:
    return synthesize()


@pytest.fixture(scope="session")
def global_template(synthesized: Synthesized) -> Any:
    return synthesized.template("gco-global")


@pytest.fixture(scope="session")
def regional_template(synthesized: Synthesized) -> Any:
    return synthesized.template(f"gco-regional-{OTHER}")


@pytest.fixture(scope="session")
def home_regional_template(synthesized: Synthesized) -> Any:
    return synthesized.template(f"gco-regional-{HOME}")


@pytest.fixture(scope="session")
def runner_template(synthesized: Synthesized) -> Any:
    return synthesized.template("gco-runner")


def iam_statements(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every policy statement in a template (identity and resource policies): (logical id, statement)."""
    found: list[tuple[str, dict[str, Any]]] = []

    def walk(node: Any, owner: str) -> None:
        if isinstance(node, dict):
            if "Effect" in node and ("Action" in node or "NotAction" in node):
                found.append((owner, node))
            for value in node.values():
                walk(value, owner)
        elif isinstance(node, list):
            for value in node:
                walk(value, owner)

    for logical_id, resource in template.get("Resources", {}).items():
        walk(resource.get("Properties", {}), logical_id)
    return found
