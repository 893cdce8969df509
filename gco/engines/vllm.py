"""vLLM: the OpenAI-compatible server (`vllm serve`, `vllm.entrypoints.openai.api_server`).

- Launch (docs.vllm.ai "Engine Arguments"): `--model`, `--revision`, `--port`,
  `--tensor-parallel-size` for more than one GPU.
- Requests: `POST /v1/completions` `{model, prompt, max_tokens, temperature 0, stream}`, answered by
  `choices[0].text`; streamed as server-sent events of the same shape (a chat chunk's
  `choices[0].delta.content`) until `data: [DONE]`. `GET /v1/models` lists the served ids
  (`data[].id`) and no revision.
- Metrics (docs.vllm.ai "Production Metrics"): `vllm:num_requests_waiting`, the queue;
  `vllm:num_requests_running`, the requests in flight; token, request and prefix-cache counters.
- Its start-up log and launch command as the bench reads them: `gco.bench.analysis.logrules.vllm`;
  the fake engine's vLLM start-up lines: `gco.bench.fake_engine.startup.vllm`; the matrix's launch:
  `gco.validation.frameworks.vllm`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gco.engines.base import (
    Framework,
    Launch,
    LaunchRead,
    chat_answer_text,
    chat_event_text,
    flag_value,
)

# Its Prometheus metrics (docs.vllm.ai "Production Metrics"); the counters are exported as `<name>_total`.
WAITING_METRIC = "vllm:num_requests_waiting"
RUNNING_METRIC = "vllm:num_requests_running"
# Time to first token, a histogram in seconds (docs.vllm.ai "Production Metrics"); the dashboards name it.
TTFT_METRIC = "vllm:time_to_first_token_seconds"
COUNTERS = (
    *("vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success", "vllm:request_failure"),
    *("vllm:prefix_cache_queries", "vllm:prefix_cache_hits"),
)


class OpenAICompletions(Framework):
    """The OpenAI completions protocol, which vLLM and SGLang both serve."""

    chat_api = True  # vLLM's and SGLang's OpenAI servers: /v1/chat/completions

    def completion(self, model: str, prompt: str, max_tokens: int) -> tuple[str, dict[str, Any]]:
        body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": False}
        return "/v1/completions", body

    def streamed(self, model: str, prompt: str, max_tokens: int) -> tuple[str, dict[str, Any]]:
        path, body = self.completion(model, prompt, max_tokens)
        return path, {**body, "stream": True}

    def answer_text(self, body: Any) -> str | None:
        return chat_answer_text(body)

    def event_text(self, event: Mapping[str, Any]) -> str:
        return chat_event_text(event)


class Vllm(OpenAICompletions):
    name = "vllm"
    label = "vLLM"
    default_port = 8000
    queue_metric = WAITING_METRIC

    def launch_args(self, launch: Launch) -> list[str]:
        args = ["--port", str(launch.port)]
        if launch.model:
            args = ["--model", launch.model, *args]
        if launch.revision:
            args += ["--revision", launch.revision]
        if launch.gpus > 1:
            args += ["--tensor-parallel-size", str(launch.gpus)]
        return args

    def launch_env(self, launch: Launch) -> dict[str, str]:
        return {}

    def read_launch(self, args: Sequence[str], env: Mapping[str, str]) -> LaunchRead | None:
        if "--model" not in args:
            return None
        return LaunchRead(model=flag_value(args, "--model"), revision=flag_value(args, "--revision"))
