"""Rounds options: what each mode refuses, the flag overrides of the workload, and the rounds to plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gco.bench.errors import BenchInputError
from gco.bench.rounds.manifest import Manifest
from gco.bench.rounds.options import RoundsOptions, check_options, planned_rounds, with_overrides

MANIFEST = Manifest.model_validate(
    {
        "engines": [{"label": "a", "argv": ["x"], "port": 8000, "model": {"id": "m"}}],
        "workload": {"extra_body": {"ignore_eos": True, "top_k": 1}},
    }
)
PLAIN = MANIFEST.model_copy(update={"workload": MANIFEST.workload.model_copy(update={"extra_body": {}})})


def _options(**values: Any) -> RoundsOptions:
    return RoundsOptions(prompts_path=Path("/p"), run_dir=Path("/r"), **values)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"mode": "clip", "ci_target": 0.1}, "--ci-target"),
        ({"mode": "clip", "min_rounds": 2}, "--min-rounds"),
        ({"mode": "clip", "extra_body": {"a": 1}}, "--extra-body"),
        ({"mode": "clip", "chat_template_kwargs": {"a": 1}}, "--chat-template-kwargs"),
        ({"mode": "clip", "reference_e2e_s": 0.1}, "--ref-e2e-ms"),
        ({"mode": "clip", "ci_target": 0.1, "reference_e2e_s": 0.1}, "--ci-target, --ref-e2e-ms"),
        ({"min_rounds": 2}, "--min-rounds"),
        ({"mode": "load", "min_rounds": 2}, "--min-rounds"),
        ({"reference_e2e_s": 0.1}, "--ref-e2e-ms"),
    ],
)
def test_refused_options_name_their_flags(values: dict[str, Any], field: str) -> None:
    with pytest.raises(BenchInputError) as caught:
        check_options(_options(**values), PLAIN)
    assert caught.value.field == field


def test_clip_mode_refuses_the_manifest_token_stream_fields_and_accepts_a_plain_one() -> None:
    with pytest.raises(BenchInputError) as caught:
        check_options(_options(mode="clip"), MANIFEST)
    assert caught.value.field == "manifest.workload.extra_body"
    check_options(_options(mode="clip", rounds=2), PLAIN)
    check_options(_options(mode="load", reference_e2e_s=0.1, ci_target=0.1, min_rounds=2), MANIFEST)


def test_flags_override_the_workload_key_by_key() -> None:
    merged = with_overrides(MANIFEST, _options(extra_body={"top_k": 5}, chat_template_kwargs={"t": 1}))
    assert merged.workload.extra_body == {"ignore_eos": True, "top_k": 5}
    assert merged.workload.chat_template_kwargs == {"t": 1}
    assert MANIFEST.workload.extra_body == {"ignore_eos": True, "top_k": 1}


def test_planned_rounds_fixed_and_adaptive() -> None:
    assert planned_rounds(3, _options()) == (6, None)
    assert planned_rounds(2, _options(rounds=3)) == (3, None)
    rounds, adaptive = planned_rounds(3, _options(ci_target=0.05))
    assert rounds == 12
    assert adaptive is not None
    assert (adaptive.min_rounds, adaptive.max_rounds, adaptive.checks) == (6, 12, [])
    with pytest.raises(BenchInputError, match="above the maximum"):
        planned_rounds(2, _options(ci_target=0.05, rounds=2, min_rounds=4))


def test_run_setting_flags_win_over_the_manifest_and_both_are_recorded() -> None:
    from gco.bench.rounds.options import run_settings

    options = _options(startup_timeout_s=30.0, warmup=0, gpu_mem_tolerance_mib=64.0)
    merged = with_overrides(MANIFEST, options)
    assert (merged.startup_timeout_s, merged.workload.warmup_requests) == (30.0, 0)
    assert (merged.stop_timeout_s, merged.serve_timeout_s) == (
        MANIFEST.stop_timeout_s,
        MANIFEST.serve_timeout_s,
    )
    assert merged.gpu_memory_tolerance_mib == 64.0
    settings = run_settings(MANIFEST, options)
    assert settings["startup_timeout_s"] == {"manifest": 1200.0, "flag": 30.0, "used": 30.0}
    assert settings["warmup"] == {"manifest": 2, "flag": 0, "used": 0}
    assert settings["stop_timeout_s"] == {"manifest": 30.0, "flag": None, "used": 30.0}
    assert set(settings) == {
        "startup_timeout_s",
        "stop_timeout_s",
        "serve_timeout_s",
        "warmup",
        "gpu_mem_tolerance_mib",
    }


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("""curl {base_url} -d '{"max_tokens": 8}'""", '{"max_tokens": 8} in'),
        ("run {prompt}", "{prompt} in"),
        ("run {round:02d}", "{round:02d} in"),
        ("run }", "Single '}'"),
        ('run "open', "cannot split into words"),
        ("   ", "no command"),
    ],
)
def test_a_serve_cmd_that_would_not_format_is_refused_before_launch(template: str, says: str) -> None:
    with pytest.raises(BenchInputError) as refused:
        check_options(_options(serve_cmd=template), PLAIN)
    assert refused.value.field == "--serve-cmd"
    assert says in str(refused.value)
    check_options(_options(serve_cmd="""curl {base_url} -d '{{"max_tokens": 8}}' {label} {round}"""), PLAIN)
