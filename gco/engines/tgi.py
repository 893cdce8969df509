"""TGI: Hugging Face's text-generation-inference (`text-generation-launcher`).

- Launch (docs "Text-generation-launcher arguments"): configured through its environment, `PORT`,
  `MODEL_ID`, `REVISION` and `NUM_SHARD` for more than one GPU; no arguments.
- Requests: `POST /generate` `{inputs, parameters {do_sample false, max_new_tokens}}` answered by
  `generated_text`; `POST /generate_stream` answers server-sent events, each one token
  (`router/src/server.rs`, `StreamResponse {index, token {id, text, logprob, special}, ...}`;
  special tokens carry no text). `GET /info` names `model_id` and `model_sha` (the revision loaded).
- Metrics (docs "Metrics"): `tgi_queue_size`, the queue.
- Its start-up log and launch command as the bench reads them: `gco.bench.analysis.logrules.tgi`;
  the fake engine's TGI start-up lines: `gco.bench.fake_engine.startup.tgi`; the matrix's launch and
  model-info reading: `gco.validation.frameworks.tgi`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gco.engines.base import Framework, Launch, LaunchRead


class Tgi(Framework):
    name = "tgi"
    label = "TGI"
    default_port = 8080
    queue_metric = "tgi_queue_size"
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
