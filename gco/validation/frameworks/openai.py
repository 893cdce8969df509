"""The OpenAI server's model info, as vLLM and SGLang serve it: `GET /v1/models` lists the served ids
(`data[].id`) and no revision; a completion's text is `choices[0].text` (the OpenAI completions API)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gco.validation.frameworks.base import MatrixAdapter


class OpenAIModels(MatrixAdapter):
    model_info_path = "/v1/models"
    answer_field = "choices[0].text"

    def served_model(self, body: Any) -> tuple[list[str], str | None]:
        data = body.get("data") if isinstance(body, Mapping) else None
        return [str(item.get("id")) for item in data or [] if isinstance(item, Mapping)], None
