"""What a framework's matrix adapter is: how the live validation matrix deploys an engine and reads it.

The matrix asks each engine as a client of that engine would (its completion request and answer are
the framework's own, `gco.engines`); what only the matrix needs is here: the model-info request and
the model ids and revision its answer names, the answer field the evidence names, and the launch the
matrix deploys it with (the framework's own launch unless its adapter says otherwise).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from gco.engines import Framework, Launch


class MatrixAdapter(ABC):
    """One framework as the matrix checks it. Class attributes are its fixed paths and fields."""

    # Its model-info request and the field of a completion answer that holds the generated text.
    model_info_path: str
    answer_field: str

    @abstractmethod
    def served_model(self, body: Any) -> tuple[list[str], str | None]:
        """The model ids and the revision (None: not reported) its model-info answer names."""

    def launch(
        self, framework: Framework, model: str, revision: str, port: int
    ) -> tuple[list[str], dict[str, str]]:
        """(arguments, environment) the matrix deploys `framework` with: by default its own launch."""
        launch = Launch(model=model, revision=revision, port=port, gpus=1)
        return framework.launch_args(launch), framework.launch_env(launch)
