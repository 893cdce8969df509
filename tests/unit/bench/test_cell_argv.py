"""The bench serve command a cell runs: gco's own with the shared reference, or --serve-cmd placeholders."""

from __future__ import annotations

from pathlib import Path

from gco.bench.rounds.cell import CellOptions
from gco.bench.rounds.manifest import Manifest
from gco.bench.rounds.measure import serve_argv

MANIFEST = Manifest.model_validate(
    {
        "engines": [{"label": "a", "argv": ["x"], "port": 8000, "model": {"id": "org/m"}}],
        "workload": {
            "extra_body": {"ignore_eos": True},
            "chat_template_kwargs": {"t": 1},
            "load": {"requests_per_level": 5},
        },
    }
)


def _options(**update: object) -> CellOptions:
    base = CellOptions(mode="load", prompts_path=Path("/p.jsonl"), run_dir=Path("/run"), reference_e2e_s=0.25)
    return base.model_copy(update=update)


def test_gco_serve_gets_the_shared_reference_and_the_workload() -> None:
    argv = serve_argv(MANIFEST.engines[0], MANIFEST, _options(), Path("/run/cell"), 3)
    assert argv[1:6] == ["-P", "-m", "gco.cli", "bench", "serve"]  # -P: safe from the working directory
    assert argv[argv.index("--reference-e2e") + 1] == "0.25"
    assert argv[argv.index("--extra-body") + 1] == '{"ignore_eos": true}'
    assert argv[argv.index("--chat-template-kwargs") + 1] == '{"t": 1}'
    assert argv[argv.index("--requests-per-level") + 1] == "5"
    assert argv[argv.index("--model") + 1] == "org/m"


def test_serve_args_that_own_the_schedule_suppress_the_reference() -> None:
    for own in (["--closed-loop"], ["--rates=1,2"], ["--reference-e2e", "1"]):
        argv = serve_argv(MANIFEST.engines[0], MANIFEST, _options(serve_args=own), Path("/c"), 1)
        assert argv.count("--reference-e2e") == (1 if own[0] == "--reference-e2e" else 0)
        assert argv[-len(own) :] == own
    single = serve_argv(MANIFEST.engines[0], MANIFEST, _options(mode="single"), Path("/c"), 1)
    assert "--reference-e2e" not in single


def test_serve_cmd_placeholders() -> None:
    options = _options(serve_cmd="bench {base_url} {prompts} {mode} {label} {round} {run_dir} {model}")
    argv = serve_argv(MANIFEST.engines[0], MANIFEST, options, Path("/run/cell"), 2)
    assert argv == ["bench", "http://127.0.0.1:8000", "/p.jsonl", "load", "a", "2", "/run/cell", "org/m"]
