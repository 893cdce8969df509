"""TGI in the matrix: `GET /info` names `model_id` and `model_sha` (the revision loaded), the answer's
text is `generated_text`, and it is launched through its environment, `MODEL_ID`, `PORT` and
`REVISION` (docs "Text-generation-launcher arguments")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gco.engines import Framework
from gco.validation.frameworks.base import MatrixAdapter


class TgiMatrix(MatrixAdapter):
    model_info_path = "/info"
    answer_field = "generated_text"

    def served_model(self, body: Any) -> tuple[list[str], str | None]:
        if not isinstance(body, Mapping):
            return [], None
        sha = body.get("model_sha")
        return ([str(body["model_id"])] if "model_id" in body else []), (str(sha) if sha else None)

    def launch(
        self, framework: Framework, model: str, revision: str, port: int
    ) -> tuple[list[str], dict[str, str]]:
        return [], {"MODEL_ID": model, "PORT": str(port), "REVISION": revision}
