"""SGLang in the matrix: its OpenAI server's model info (`openai`) and its own launch
(`gco.engines.sglang`: `--model-path`, `--host`, `--port`). The matrix runs vLLM and TGI
(`settings.FRAMEWORK_ORDER`); this entry says how it would check SGLang."""

from __future__ import annotations

from gco.validation.frameworks.openai import OpenAIModels


class SglangMatrix(OpenAIModels):
    """The OpenAI model info, the framework's own launch (`MatrixAdapter.launch`)."""
