"""TGI: Hugging Face's text-generation-inference (`text-generation-launcher`).

- Launch (docs "Text-generation-launcher arguments"): configured through its environment, `PORT`,
  `MODEL_ID`, `REVISION` and `NUM_SHARD` for more than one GPU; no arguments.
- Requests: `POST /generate` `{inputs, parameters {do_sample false, max_new_tokens}}` answered by
  `generated_text`; `POST /generate_stream` answers server-sent events, each one token
  (`router/src/server.rs`, `StreamResponse {index, token {id, text, logprob, special}, ...}`;
  special tokens carry no text). `GET /info` names `model_id` and `model_sha` (the revision loaded).
- Metrics (docs "Metrics"): `tgi_queue_size`, the queue.
- Start-up log: `text_generation_launcher: Args { ... }` on one line or pretty-printed over many;
  attention: `Using attention flashinfer - Prefix caching true` (launcher) and `Using Attention =
  flashinfer` (shard); `paged` is the non-flash fallback.
- Gates: `Args { cuda_graphs: None }` means the launcher's default capture sizes ("Using default
  cuda graphs [1, 2, 4, 8, 16, 32]" follows in the log); `Some([0])` turns them off. The launcher has
  no CPU-offload option, so an Args block proves no offload. Launch command: `--cuda-graphs 0` or
  `CUDA_GRAPHS=0` disables CUDA graphs; `ATTENTION=paged` selects the paged kernels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gco.engines.base import (
    ATTENTION_FALLBACK,
    GRAPHS_OFF,
    OFFLOAD,
    ArgumentDump,
    ConfigBlock,
    EngineFlags,
    Framework,
    Launch,
    LaunchRead,
    LogGates,
)
from gco.engines.logsyntax import pairs

ARGS = re.compile(r"\bArgs \{(?P<body>.*)$")
GRAPHS_OFF_VALUES = ("Some([0])", "Some([])", "[0]", "[]")
DEFAULT_GRAPHS_LINE = "Using default cuda graphs"
MAX_BLOCK_LINES = 400


def args_block(first: str, rest: Sequence[str]) -> str:
    """The body of the Args block: one line, or the pretty-printed lines up to the closing brace."""
    if first.rstrip().endswith("}"):
        return first.rstrip()[:-1]
    body = [first]
    for count, line in enumerate(rest):
        if line.strip() == "}" or count >= MAX_BLOCK_LINES:
            break
        body.append(line)
    return " ".join(body)


def graphs_on(settings: Mapping[str, str]) -> bool | None:
    """CUDA graphs on from the Args' `cuda_graphs`; None when the block does not show it."""
    value = settings.get("cuda_graphs")
    if value is None:
        return None
    return "".join(value.split()) not in GRAPHS_OFF_VALUES


class Tgi(Framework):
    name = "tgi"
    label = "TGI"
    default_port = 8080
    queue_metric = "tgi_queue_size"
    program = re.compile(r"text-generation-launcher|text_generation_server")
    backend_lines = (
        re.compile(r"\bUsing Attention = (?P<b>[\w-]+)"),
        re.compile(r"\bUsing attention (?P<b>[\w-]+) - Prefix caching"),
    )
    fallback_backends = ("paged",)
    model_info_path = "/info"
    answer_field = "generated_text"
    chat_api = True  # the Messages API, /v1/chat/completions (TGI >= 1.4.0)

    def launch_args(self, launch: Launch) -> list[str]:
        return []

    def launch_env(self, launch: Launch) -> dict[str, str]:
        env = {"PORT": str(launch.port)}
        if launch.model:
            env["MODEL_ID"] = launch.model
        if launch.revision:
            env["REVISION"] = launch.revision
        if launch.gpus > 1:
            env["NUM_SHARD"] = str(launch.gpus)
        return env

    def read_launch(self, args: Sequence[str], env: Mapping[str, str]) -> LaunchRead | None:
        if "MODEL_ID" not in env:
            return None
        return LaunchRead(model=env["MODEL_ID"], revision=env.get("REVISION", ""))

    def matrix_launch(self, model: str, revision: str, port: int) -> tuple[list[str], dict[str, str]]:
        return [], {"MODEL_ID": model, "PORT": str(port), "REVISION": revision}

    def completion(self, model: str, prompt: str, max_tokens: int) -> tuple[str, dict[str, Any]]:
        return "/generate", {
            "inputs": prompt,
            "parameters": {"do_sample": False, "max_new_tokens": max_tokens},
        }

    def streamed(self, model: str, prompt: str, max_tokens: int) -> tuple[str, dict[str, Any]]:
        return "/generate_stream", self.completion(model, prompt, max_tokens)[1]

    def answer_text(self, body: Any) -> str | None:
        try:
            text = body["generated_text"]
        except (KeyError, IndexError, TypeError):
            return None
        return text if isinstance(text, str) else None

    def event_text(self, event: Mapping[str, Any]) -> str:
        token = event.get("token")
        if not isinstance(token, dict) or token.get("special"):
            return ""
        return str(token.get("text") or "")

    def served_model(self, body: Any) -> tuple[list[str], str | None]:
        if not isinstance(body, Mapping):
            return [], None
        sha = body.get("model_sha")
        return ([str(body["model_id"])] if "model_id" in body else []), (str(sha) if sha else None)

    def config_block(self, line: str, following: Sequence[str]) -> ConfigBlock | None:
        found = ARGS.search(line)
        return None if found is None else ConfigBlock(pairs(args_block(found["body"], following), ":"))

    def log_gates(self, block: ConfigBlock | None, dumps: Sequence[ArgumentDump]) -> LogGates:
        if block is None:
            return LogGates()
        return LogGates(cuda_graphs=graphs_on(block.settings), gpu_offload=False)

    def launch_facts(self, options: Mapping[str, list[str]], env: Mapping[str, str]) -> dict[str, list[str]]:
        graphs = options.get("--cuda-graphs", []) + ([env["CUDA_GRAPHS"]] if "CUDA_GRAPHS" in env else [])
        off = [f"--cuda-graphs/CUDA_GRAPHS {v}" for v in graphs if v.strip() == "0"]
        fallback = ["env ATTENTION=paged"] if env.get("ATTENTION", "").lower() == "paged" else []
        return {OFFLOAD: [], GRAPHS_OFF: off, ATTENTION_FALLBACK: fallback}

    def startup_values(self, flags: EngineFlags) -> dict[str, str]:
        graphs = "None" if flags.cuda_graphs is None else f"Some([{flags.cuda_graphs}])"
        return {"model": flags.model, "port": str(flags.port), "cuda_graphs": graphs}

    def startup_kept(self, line: str, flags: EngineFlags) -> bool:
        # Given capture sizes replace the launcher's default ones and their log line.
        return flags.cuda_graphs is None or DEFAULT_GRAPHS_LINE not in line
