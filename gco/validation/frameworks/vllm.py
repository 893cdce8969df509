"""vLLM in the matrix: its OpenAI server's model info (`openai`), launched with `--model` and
`--revision` (docs.vllm.ai "Engine Arguments": the matrix pins the revision it checks) and `MODEL` in
its environment, the launch docs/matrix.md records for the matrix's identity."""

from __future__ import annotations

from gco.engines import Framework
from gco.validation.frameworks.openai import OpenAIModels


class VllmMatrix(OpenAIModels):
    def launch(
        self, framework: Framework, model: str, revision: str, port: int
    ) -> tuple[list[str], dict[str, str]]:
        return ["--model", model, "--revision", revision], {"MODEL": model}
