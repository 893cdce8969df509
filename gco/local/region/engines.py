"""The local engine table: which program runs one replica of a Deployment on this machine.

A kubelet would pull the container image and run it on a GPU node; the local stack has neither,
so it asks the engine frameworks (`gco.engines`) which one's launch the pod template's serving
container carries and what model and revision it names (each framework reads back the launch it
renders), and runs, per framework, the command of the engine table on a loopback port. The
default table runs the project's fake engine for every framework; the `llama` table runs a real
CPU engine (SmolLM2-135M-Instruct on llama.cpp, `gco.local.llama.llama_engine`) for every framework; any
other command can be named per framework with `{port}`, `{model}` and `{revision}` placeholders.

A test and demo knob: the replicas of named container images run the fake engine with extra
arguments, whatever the table (`EngineTable.image_args`; for `gco local up`, env
`GCO_LOCAL_FAKE_IMAGE_ARGS`, a JSON object of image -> list of the fake engine's arguments, e.g.
`{"registry.example.com/vllm:slow": ["--ttft-ms", "180"]}`), so two images of one endpoint (its primary
and its canary) answer at known, different speeds or failure rates. A real kubelet runs whatever the
image holds; this stands in for "the canary's build is slower".
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from gco import engines
from gco.processes.interpreter import python_module

DEFAULT_HEALTH_PATH = "/health"
FAKE_ENGINE = tuple(python_module("gco.bench.fake_engine"))
LLAMA_ENGINE = tuple(python_module("gco.local.llama.llama_engine"))
ENGINE_KINDS = ("fake", "llama")  # `gco local up|demo --engine`
LLAMA_THREADS = 1  # per replica: the local stack runs several on a small machine
FAKE_ARGV = (
    *FAKE_ENGINE,
    "--style",
    "{framework}",
    "--port",
    "{port}",
    "--model",
    "{model}",
    "--revision",
    "{revision}",
)
FAKE_IMAGE_ARGS_ENV = "GCO_LOCAL_FAKE_IMAGE_ARGS"  # image -> extra fake-engine arguments (module docstring)


class EngineLaunch(BaseModel):
    """What one replica serves, read from its pod template."""

    model_config = ConfigDict(frozen=True)

    framework: str
    model: str
    revision: str
    health_path: str
    image: str = ""


def serving_container(template: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod template's model server (a container probed over HTTP), or None (a proxy, a store)."""
    for container in (template.get("spec") or {}).get("containers") or []:
        if "httpGet" in (container.get("readinessProbe") or {}):
            return container  # type: ignore[no-any-return]
    return None


def launch_of(template: Mapping[str, Any]) -> EngineLaunch | None:
    """The framework, model and health path of a pod template, or None when it serves no model."""
    container = serving_container(template)
    if container is None:
        return None
    env = {item.get("name"): str(item.get("value", "")) for item in container.get("env") or []}
    args = [str(arg) for arg in container.get("args") or []]
    health = str(container["readinessProbe"]["httpGet"].get("path") or DEFAULT_HEALTH_PATH)
    framework, read = engines.launched(args, env)
    return EngineLaunch(
        framework=framework.name,
        model=read.model,
        revision=read.revision,
        health_path=health,
        image=str(container.get("image") or ""),
    )


class EngineTable(BaseModel):
    """Per framework the argv of a local engine; placeholders {port}, {model}, {revision}, {framework}."""

    model_config = ConfigDict(frozen=True)

    commands: dict[str, tuple[str, ...]]
    image_args: dict[str, tuple[str, ...]] = {}  # per container image, appended (the fake engine's knob)

    @classmethod
    def fake(cls, *extra: str, image_args: Mapping[str, tuple[str, ...]] | None = None) -> EngineTable:
        """The fake engine for every framework (its protocol style follows the framework); the
        replicas of the images in `image_args` get those arguments too."""
        return cls(
            commands={f: (*FAKE_ARGV, *extra) for f in engines.names()}, image_args=dict(image_args or {})
        )

    @classmethod
    def llama(
        cls, threads: int = LLAMA_THREADS, *, image_args: Mapping[str, tuple[str, ...]] | None = None
    ) -> EngineTable:
        """SmolLM2-135M-Instruct on llama.cpp for every framework, served under the pod's model id;
        the replicas of the images in `image_args` run the fake engine with those arguments."""
        argv = (*LLAMA_ENGINE, "--style", "{framework}", "--port", "{port}", "--model-name", "{model}")
        return cls(
            commands={f: (*argv, "--threads", str(threads)) for f in engines.names()},
            image_args=dict(image_args or {}),
        )

    @classmethod
    def of_kind(cls, kind: str) -> EngineTable:
        """The table `--engine KIND` names (one of ENGINE_KINDS).

        Raises:
            ValueError: `kind` is not one of ENGINE_KINDS (the CLI offers only those).
        """
        if kind not in ENGINE_KINDS:
            raise ValueError(f"engine kind {kind!r} is not one of {', '.join(ENGINE_KINDS)}")
        image_args = fake_image_args(os.environ)
        return cls.llama(image_args=image_args) if kind == "llama" else cls.fake(image_args=image_args)

    def argv(self, launch: EngineLaunch, port: int) -> list[str]:
        extra = self.image_args.get(launch.image)
        if extra is not None:  # the knob: this image runs the fake engine, with these arguments
            command = (*FAKE_ARGV, *extra)
        else:
            command = self.commands.get(launch.framework) or self.commands[engines.DEFAULT]
        values = {
            "port": str(port),
            "model": launch.model,
            "revision": launch.revision,
            "framework": launch.framework,
        }
        return [part.format(**values) for part in command]


def fake_image_args(environ: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """The fake engine's per-image arguments from `FAKE_IMAGE_ARGS_ENV` (none when unset).

    Raises:
        ValueError: the variable is not a JSON object of image -> list of strings.
    """
    text = environ.get(FAKE_IMAGE_ARGS_ENV)
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    valid = isinstance(value, dict) and all(
        isinstance(args, list) and all(isinstance(arg, str) for arg in args) for args in value.values()
    )
    if not valid:
        raise ValueError(f"{FAKE_IMAGE_ARGS_ENV} is not a JSON object of image -> list of strings")
    return {str(image): tuple(args) for image, args in value.items()}
