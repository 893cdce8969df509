"""Each engine framework's matrix adapter, found by framework name: `MATRIX_ADAPTERS["tgi"]`.

A framework's module (`vllm`, `tgi`, `sglang`; `openai` the model info vLLM and SGLang share) says
how the matrix launches it and reads its model-info answer (`base.MatrixAdapter`); `adapters` asks
for a runtime's. Every framework registered in `gco.engines` has an entry here, also one the matrix
does not run (tests/unit/engines/test_registry.py holds it); a new one is its module and one line of
`MATRIX_ADAPTERS`.
"""

from __future__ import annotations

from gco import engines
from gco.engines.sglang import Sglang
from gco.engines.tgi import Tgi
from gco.engines.vllm import Vllm
from gco.validation.frameworks.base import MatrixAdapter
from gco.validation.frameworks.sglang import SglangMatrix
from gco.validation.frameworks.tgi import TgiMatrix
from gco.validation.frameworks.vllm import VllmMatrix

MATRIX_ADAPTERS: dict[str, MatrixAdapter] = {
    Vllm.name: VllmMatrix(),
    Tgi.name: TgiMatrix(),
    Sglang.name: SglangMatrix(),
}


def adapter_for(name: str) -> MatrixAdapter:
    """The matrix adapter of the registered framework `name`.

    Raises:
        UnknownFrameworkError: no framework is registered under `name`.
        MissingFrameworkEntryError: it is registered without an entry in `MATRIX_ADAPTERS`.
    """
    return engines.entry(MATRIX_ADAPTERS, name, "matrix adapter")
