"""Pure per-engine adapters: how the matrix launches, asks and reads vLLM and TGI.

Each function is the engine's documented interface, so the matrix checks an endpoint as a client
of that engine would:

- vLLM's OpenAI server: `POST /v1/completions` `{model, prompt, max_tokens, temperature: 0,
  stream: false}` answered by `choices[0].text`; `GET /v1/models` lists the served model ids
  (`data[].id`). It is launched with `--model ID --revision REV` and `MODEL` in its environment.
  `/v1/models` does not report the revision, so the served revision of vLLM is read from the
  launch arguments of the Deployment the cluster runs (`launched_revision`).
- TGI: `POST /generate` `{inputs, parameters: {do_sample: false, max_new_tokens}}` answered by
  `generated_text`; `GET /info` names `model_id` and `model_sha` (the revision it loaded). It is
  configured by `MODEL_ID`, `PORT` and `REVISION` in its environment.

The image is used exactly as given (no registry rewrite).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gco.validation.settings import MatrixSettings, Runtime

REQUEST_PATHS = {"vllm": "/v1/completions", "tgi": "/generate"}
MODEL_INFO_PATHS = {"vllm": "/v1/models", "tgi": "/info"}
RESPONSE_FIELDS = {"vllm": "choices[0].text", "tgi": "generated_text"}


def request_path(runtime: Runtime) -> str:
    return REQUEST_PATHS[runtime.framework]


def model_info_path(runtime: Runtime) -> str:
    return MODEL_INFO_PATHS[runtime.framework]


def request_body(settings: MatrixSettings, runtime: Runtime) -> dict[str, Any]:
    """The one deterministic request the matrix sends (greedy decoding, no stream)."""
    if runtime.framework == "tgi":
        return {
            "inputs": settings.request_prompt,
            "parameters": {"do_sample": False, "max_new_tokens": settings.request_max_tokens},
        }
    return {
        "model": runtime.model_id,
        "prompt": settings.request_prompt,
        "max_tokens": settings.request_max_tokens,
        "temperature": 0,
        "stream": False,
    }


def launch_env(runtime: Runtime) -> dict[str, str]:
    """The engine's environment: TGI is configured by it; vLLM only gets `MODEL`."""
    if runtime.framework == "tgi":
        return {"MODEL_ID": runtime.model_id, "PORT": str(runtime.port), "REVISION": runtime.model_revision}
    return {"MODEL": runtime.model_id}


def launch_args(runtime: Runtime) -> list[str]:
    """The engine's arguments: vLLM names model and revision; TGI takes none."""
    if runtime.framework == "vllm":
        return ["--model", runtime.model_id, "--revision", runtime.model_revision]
    return []


def response_text(runtime: Runtime, body: Any) -> str | None:
    """The generated text if the answer meets the response contract (a non-empty string), else None."""
    try:
        text = body["choices"][0]["text"] if runtime.framework == "vllm" else body["generated_text"]
    except (KeyError, IndexError, TypeError):
        return None
    return text if isinstance(text, str) and text else None


def served_model(runtime: Runtime, body: Any) -> tuple[list[str], str | None]:
    """The model ids the engine's model-info answer names, and the revision it names (None: none).

    vLLM: every `data[].id` and no revision; TGI: `model_id` and `model_sha`.
    """
    if runtime.framework == "vllm":
        data = body.get("data") if isinstance(body, Mapping) else None
        ids = [str(item.get("id")) for item in data or [] if isinstance(item, Mapping)]
        return ids, None
    if not isinstance(body, Mapping):
        return [], None
    sha = body.get("model_sha")
    return ([str(body["model_id"])] if "model_id" in body else []), (str(sha) if sha else None)


def launched_revision(runtime: Runtime, container: Mapping[str, Any]) -> str | None:
    """The revision a Deployment's serving container was launched with (vLLM `--revision`, TGI `REVISION`)."""
    if runtime.framework == "tgi":
        env = {item.get("name"): item.get("value") for item in container.get("env") or []}
        value = env.get("REVISION")
        return str(value) if value else None
    args: Sequence[Any] = container.get("args") or []
    for index, arg in enumerate(args[:-1]):
        if arg == "--revision":
            return str(args[index + 1])
    return None
