"""Pure per-engine adapters: how the matrix launches, asks and reads its engines.

Each function is the engine framework's documented interface, so the matrix checks an endpoint as a
client of that engine would: its completion request (greedy decoding, no stream, `gco.engines`) and
the answer field holding the text, its model-info request and the model ids and revision it names,
and the launch the matrix deploys it with (the framework's matrix adapter, `frameworks`: vLLM's
OpenAI server, TGI's `/generate` and `/info`). Where the model-info answer does not report the
revision (vLLM's `/v1/models`), the served revision is read from the launch of the Deployment the
cluster runs (`launched_revision`).

The image is used exactly as given (no registry rewrite).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gco import engines
from gco.validation.frameworks import adapter_for
from gco.validation.settings import MatrixSettings, Runtime


def request_path(runtime: Runtime) -> str:
    return engines.get(runtime.framework).completion(runtime.model_id, "", 1)[0]


def model_info_path(runtime: Runtime) -> str:
    return adapter_for(runtime.framework).model_info_path


def response_field(runtime: Runtime) -> str:
    """Where in the answer the generated text is (`choices[0].text`, `generated_text`)."""
    return adapter_for(runtime.framework).answer_field


def request_body(settings: MatrixSettings, runtime: Runtime) -> dict[str, Any]:
    """The one deterministic request the matrix sends (greedy decoding, no stream)."""
    framework = engines.get(runtime.framework)
    return framework.completion(runtime.model_id, settings.request_prompt, settings.request_max_tokens)[1]


def _matrix_launch(runtime: Runtime) -> tuple[list[str], dict[str, str]]:
    framework = engines.get(runtime.framework)
    return adapter_for(runtime.framework).launch(
        framework, runtime.model_id, runtime.model_revision, runtime.port
    )


def launch_env(runtime: Runtime) -> dict[str, str]:
    """The engine's environment as the matrix launches it."""
    return _matrix_launch(runtime)[1]


def launch_args(runtime: Runtime) -> list[str]:
    """The engine's arguments as the matrix launches it."""
    return _matrix_launch(runtime)[0]


def response_text(runtime: Runtime, body: Any) -> str | None:
    """The generated text if the answer meets the response contract (a non-empty string), else None."""
    text = engines.get(runtime.framework).answer_text(body)
    return text or None


def served_model(runtime: Runtime, body: Any) -> tuple[list[str], str | None]:
    """The model ids the engine's model-info answer names, and the revision it names (None: none)."""
    return adapter_for(runtime.framework).served_model(body)


def launched_revision(runtime: Runtime, container: Mapping[str, Any]) -> str | None:
    """The revision a Deployment's serving container was launched with."""
    env = {str(item.get("name")): str(item.get("value") or "") for item in container.get("env") or []}
    args = [str(arg) for arg in container.get("args") or []]
    read = engines.get(runtime.framework).read_launch(args, env)
    return (read.revision or None) if read is not None else None
