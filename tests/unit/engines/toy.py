"""A made-up engine framework, `toy`, for the tests that adding a framework is a module per concern.

It stands in for no real engine: its names (`toy-serve`, `--weights`, `toy_waiting_requests`, the
`toy-serve config:` JSON line, `/about`) are invented so that nothing it shows can come from vLLM, TGI
or SGLang. It models what the modules of a framework declare (its launch and protocol, its log rules,
its matrix adapter; its start-up template is the base one, which logs no lines), not an engine's
behaviour.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gco.bench.analysis.logrules.base import (
    ATTENTION_FALLBACK,
    GRAPHS_OFF,
    OFFLOAD,
    ConfigBlock,
    LogGates,
    LogRules,
)
from gco.engines.base import Framework, Launch, LaunchRead, flag_value
from gco.validation.frameworks.base import MatrixAdapter

CONFIG_LINE = re.compile(r"toy-serve config: (?P<body>\{.*\})$")


class Toy(Framework):
    name = "toy"
    label = "Toy Serve"
    default_port = 7000
    queue_metric = "toy_waiting_requests"

    def launch_args(self, launch: Launch) -> list[str]:
        args = ["--listen-port", str(launch.port), "--shards", str(max(launch.gpus, 1))]
        return ["--weights", launch.model, *args] if launch.model else args

    def launch_env(self, launch: Launch) -> dict[str, str]:
        return {"TOY_REVISION": launch.revision} if launch.revision else {}

    def read_launch(self, args: Sequence[str], env: Mapping[str, str]) -> LaunchRead | None:
        if "--weights" not in args:
            return None
        return LaunchRead(model=flag_value(args, "--weights"), revision=env.get("TOY_REVISION", ""))

    def completion(self, model: str, prompt: str, max_tokens: int) -> tuple[str, dict[str, Any]]:
        return "/infer", {"text": prompt, "limit": max_tokens}

    def streamed(self, model: str, prompt: str, max_tokens: int) -> tuple[str, dict[str, Any]]:
        return "/infer/stream", {"text": prompt, "limit": max_tokens}

    def answer_text(self, body: Any) -> str | None:
        text = body.get("output") if isinstance(body, Mapping) else None
        return text if isinstance(text, str) else None

    def event_text(self, event: Mapping[str, Any]) -> str:
        return str(event.get("delta") or "")


class ToyLogRules(LogRules):
    program = re.compile(r"\btoy-serve\b")
    backend_lines = (re.compile(r"toy kernels: (?P<b>\w+)"),)
    fallback_backends = ("slowpath",)

    def config_block(self, line: str, following: Sequence[str]) -> ConfigBlock | None:
        found = CONFIG_LINE.search(line)
        if found is None:
            return None
        settings = {key: json.dumps(value) for key, value in json.loads(found["body"]).items()}
        return ConfigBlock(settings, version=settings.get("version", "").strip('"') or None)

    def log_gates(self, block: ConfigBlock | None, dumps: Sequence[Any]) -> LogGates:
        if block is None:
            return LogGates()
        graphs = block.settings.get("graphs") == "true"
        offload = block.settings.get("offload") == "true"
        return LogGates(cuda_graphs=graphs, gpu_offload=offload, evidence={"cuda graphs": ["toy graphs"]})

    def launch_facts(self, options: Mapping[str, list[str]], env: Mapping[str, str]) -> dict[str, list[str]]:
        off = ["argv --no-graphs"] if "--no-graphs" in options else []
        return {OFFLOAD: [], GRAPHS_OFF: off, ATTENTION_FALLBACK: []}


class ToyMatrix(MatrixAdapter):
    model_info_path = "/about"
    answer_field = "output"

    def served_model(self, body: Any) -> tuple[list[str], str | None]:
        return (
            ([str(body["weights"])], None) if isinstance(body, Mapping) and "weights" in body else ([], None)
        )
