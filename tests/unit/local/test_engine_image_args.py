"""The engine table's per-image knob: the replicas of named images run the fake engine with arguments."""

from __future__ import annotations

import pytest

from gco.local.region.engines import (
    FAKE_ENGINE,
    FAKE_IMAGE_ARGS_ENV,
    EngineLaunch,
    EngineTable,
    fake_image_args,
)

SLOW = "registry.example.com/chat:slow"


def launch(image: str) -> EngineLaunch:
    return EngineLaunch(framework="vllm", model="m", revision="r", health_path="/health", image=image)


def test_an_images_replicas_get_its_arguments_and_others_none() -> None:
    table = EngineTable.fake(image_args={SLOW: ("--ttft-ms", "180")})
    assert table.argv(launch(SLOW), 9000)[-2:] == ["--ttft-ms", "180"]
    assert "--ttft-ms" not in table.argv(launch("other:1"), 9000)


def test_under_the_cpu_engine_an_image_of_the_knob_runs_the_fake_engine() -> None:
    table = EngineTable.llama(image_args={SLOW: ("--fail-rate", "1")})
    argv = table.argv(launch(SLOW), 9000)
    assert argv[: len(FAKE_ENGINE)] == list(FAKE_ENGINE) and argv[-2:] == ["--fail-rate", "1"]
    assert table.argv(launch("other:1"), 9000)[: len(FAKE_ENGINE)] != list(FAKE_ENGINE)


def test_the_environment_knob_is_a_json_object_of_argument_lists() -> None:
    assert fake_image_args({}) == {}
    assert fake_image_args({FAKE_IMAGE_ARGS_ENV: '{"a:1": ["--itl-ms", "2"]}'}) == {"a:1": ("--itl-ms", "2")}
    for bad in ("[]", "{", '{"a:1": "--itl-ms"}', '{"a:1": [2]}'):
        with pytest.raises(ValueError, match=FAKE_IMAGE_ARGS_ENV):
            fake_image_args({FAKE_IMAGE_ARGS_ENV: bad})
