"""The start-up log lines of the fake engine, in the vLLM, TGI and SGLang formats that `enginelog` parses.

Kept beside the fake engine so that tests of the log parser and of rounds read the same lines.
"""

from __future__ import annotations

from collections.abc import Sequence


def startup_lines(style: str, settings: dict[str, str], extra: Sequence[str]) -> list[str]:
    """Log lines announcing the resolved configuration, in the engine family's own format."""
    if style == "tgi":
        args = ", ".join(f"{key}: {value}" for key, value in settings.items())
        lines = [
            f"INFO text_generation_launcher: Args {{ {args} }}",
            "INFO text_generation_launcher: Using Attention = flashinfer",
        ]
    elif style == "sglang":
        args = ", ".join(f"{key}={value}" for key, value in settings.items())
        lines = [f"[2026-01-01 00:00:00] server_args=ServerArgs({args})"]
    else:
        args = ", ".join(f"{key}={value}" for key, value in settings.items())
        lines = [
            f"INFO 01-01 00:00:00 [core.py:69] Initializing a V1 LLM engine (v0.9.0) with config: {args}",
            "INFO 01-01 00:00:00 [cuda.py:217] Using Flash Attention backend on V1 engine.",
        ]
    return [*lines, *extra]


DEFAULT_SETTINGS = {
    "vllm": {
        "model": "'fake/model'",
        "dtype": "torch.bfloat16",
        "enforce_eager": "False",
        "cpu_offload_gb": "0",
    },
    "tgi": {"model_id": '"fake/model"', "dtype": "Some(BFloat16)", "cuda_graphs": "None"},
    "sglang": {
        "model_path": "'fake/model'",
        "dtype": "'bfloat16'",
        "disable_cuda_graph": "False",
        "attention_backend": "'flashinfer'",
        "cpu_offload_gb": "0",
    },
}
