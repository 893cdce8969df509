"""One synthesis of the whole app (home + two Regions + runner, all five nag packs) per session."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

ROOT = Path(__file__).resolve().parents[2]
HOME, OTHER = "us-east-1", "us-west-2"


def cdk_json_config() -> dict[str, Any]:
    """The `gco` context of cdk.json, with dependency installs off (tests stay offline and fast)."""
    config: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]["gco"]
    return {**config, "regions": [HOME, OTHER], "home_region": HOME, "bundle_dependencies": False}


@dataclass
class Synthesized:
    gco: Any
    assembly: Any

    def template_json(self, stack_name: str) -> dict[str, Any]:
        return dict(self.assembly.get_stack_by_name(stack_name).template)

    def template(self, stack_name: str) -> Any:
        from aws_cdk.assertions import Template

        return Template.from_json(self.template_json(stack_name))


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    from aws_cdk import App

    from stacks.app import build_app
    from stacks.config import parse_config

    app = App(outdir=str(tmp_path_factory.mktemp("cdk.out")))
    gco = build_app(parse_config(cdk_json_config()), app=app)
    return Synthesized(gco=gco, assembly=app.synth())


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
