"""One synthesis of the whole test app per process, shared by the CDK and the runner workflow tests."""

from __future__ import annotations

import functools
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

ROOT = Path(__file__).resolve().parents[2]
HOME, OTHER = "us-east-1", "us-west-2"
# The global address the test app synthesizes (docs/global.md): an example zone, never looked up.
GLOBAL_ADDRESS = {
    "domain_name": "llm.example.com",
    "hosted_zone_id": "Z0123456789EXAMPLE",
    "hosted_zone_name": "example.com",
}


def cdk_json_config() -> dict[str, Any]:
    """The `gco` context of cdk.json, with dependency installs off (tests stay offline and fast) and
    the global address on (cdk.json leaves it off: a deploy with an example zone would fail)."""
    config: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]["gco"]
    return {
        **config,
        "regions": [HOME, OTHER],
        "home_region": HOME,
        "bundle_dependencies": False,
        "global_address": GLOBAL_ADDRESS,
    }


@dataclass
class Synthesized:
    gco: Any
    assembly: Any

    def template_json(self, stack_name: str) -> dict[str, Any]:
        return dict(self.assembly.get_stack_by_name(stack_name).template)

    def template(self, stack_name: str) -> Any:
        from aws_cdk.assertions import Template

        return Template.from_json(self.template_json(stack_name))


@functools.cache
def synthesize() -> Synthesized:
    from aws_cdk import App

    from stacks.app import build_app
    from stacks.config import parse_config

    app = App(outdir=tempfile.mkdtemp(prefix="gco-cdk-test-"))
    gco = build_app(parse_config(cdk_json_config()), app=app)
    return Synthesized(gco=gco, assembly=app.synth())


@functools.cache
def synthesize_deployed() -> Path:
    """The test app synthesized as `cdk deploy` would ship it: every bundle with its lock's wheels (PyPI
    and pip's cache on a first build; the bundle cache after). Its assembly's directory."""
    from aws_cdk import App

    from stacks.app import build_app
    from stacks.config import parse_config

    app = App(outdir=tempfile.mkdtemp(prefix="gco-cdk-deployed-"))
    build_app(parse_config({**cdk_json_config(), "bundle_dependencies": True}), app=app)
    return Path(app.synth().directory)


def state_machine_definition(
    template: dict[str, Any], name: str = "gco-gpu-runner", substitute: dict[str, str] | None = None
) -> dict[str, Any]:
    """The ASL of the named state machine; each CloudFormation token becomes the value of the first
    `substitute` key found in it ("Partition" -> "aws", "LaunchTemplate" -> an id, ...), else "TOKEN"."""
    substitute = substitute or {}
    machine = next(
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::StepFunctions::StateMachine" and r["Properties"]["StateMachineName"] == name
    )
    body = machine["Properties"]["DefinitionString"]
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]

    def value(part: Any) -> str:
        if isinstance(part, str):
            return part
        text = json.dumps(part)
        return next((v for k, v in substitute.items() if k in text), "TOKEN")

    return dict(json.loads("".join(value(p) for p in parts)))


def runner_definition(substitute: dict[str, str], name: str = "gco-gpu-runner") -> dict[str, Any]:
    """`state_machine_definition` of a runner state machine (they live in the global stack)."""
    return state_machine_definition(synthesize().template_json("gco-global"), name, substitute)
