"""SGLang: its OpenAI-compatible server (`python -m sglang.launch_server`).

- Launch (docs.sglang.ai "Server Arguments"): `--model-path`, `--host`, `--port`, `--tp` for more
  than one GPU; it listens on 127.0.0.1 unless told, so the pod's interface is named.
- Requests: the OpenAI completions protocol, as vLLM's (`gco.engines.vllm.OpenAICompletions`).
- Metrics: `--enable-metrics` serves Prometheus metrics on /metrics of the serving port (docs.sglang.ai
  "Production Metrics": off unless asked), among them the histogram `TTFT_METRIC`, which the
  dashboards draw; no queue metric is read for it (queue_depth autoscaling reads vLLM's and TGI's).
- Its start-up log and launch command as the bench reads them: `gco.bench.analysis.logrules.sglang`;
  the fake engine's SGLang start-up lines: `gco.bench.fake_engine.startup.sglang`; the matrix's
  adapter: `gco.validation.frameworks.sglang`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gco.engines.base import Launch, LaunchRead, flag_value
from gco.engines.vllm import OpenAICompletions

ALL_INTERFACES = "0.0.0.0"  # noqa: S104 - the pod's own interface
# Time to first token, a histogram in seconds (docs.sglang.ai "Production Metrics").
TTFT_METRIC = "sglang:time_to_first_token_seconds"


class Sglang(OpenAICompletions):
    name = "sglang"
    label = "SGLang"
    default_port = 30000

    def launch_args(self, launch: Launch) -> list[str]:
        args = ["--host", ALL_INTERFACES, "--port", str(launch.port), "--enable-metrics"]
        if launch.model:
            args = ["--model-path", launch.model, *args]
        if launch.gpus > 1:
            args += ["--tp", str(launch.gpus)]
        return args

    def launch_env(self, launch: Launch) -> dict[str, str]:
        return {}

    def read_launch(self, args: Sequence[str], env: Mapping[str, str]) -> LaunchRead | None:
        if "--model-path" not in args:
            return None
        return LaunchRead(model=flag_value(args, "--model-path"), revision="")
