"""Streaming through the global address: the first token reaches the caller while the engine still
holds the rest (the fake engine's `--hold-file`: after its first token it waits for the file), so no
hop on the way (the global address, the Region's proxy, the Service network) buffered the answer."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gco.inference.invoke import send_stream
from gco.local.region.engines import EngineTable
from tests.functional.conftest import Deployed
from tests.functional.local.conftest import DEADLINE_S
from tests.functional.local.front.conftest import Global, running_world
from tests.functional.local.test_engines import SPEC
from tests.unit.reconcile.records import EAST

TOKENS = 4


@pytest.fixture
def held(deployed: Deployed, dynamodb: Any, tmp_path: Path) -> Iterator[tuple[Global, Path]]:
    """The global address over two Regions run from the synthesized app, engines holding their streams."""
    hold = tmp_path / "release"
    with running_world(deployed, dynamodb, tmp_path, EngineTable.fake("--hold-file", str(hold))) as world:
        yield world, hold


def test_the_first_token_arrives_before_the_engine_made_the_rest(held: tuple[Global, Path]) -> None:
    world, hold = held
    world.deploy("smol", [EAST])  # its non-streamed requests are not held
    pieces: queue.Queue[str] = queue.Queue()
    results: list[Any] = []
    body = {"model": SPEC["model_id"], "prompt": "hi", "max_tokens": TOKENS, "stream": True}

    def call() -> None:
        results.append(
            send_stream(
                "global",
                f"{world.front.url}/inference/smol/v1/completions",
                body,
                signed=False,
                on_text=pieces.put,
                timeout=60,
                headers={"authorization": f"Bearer {world.key}"},
            )
        )

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    assert pieces.get(timeout=DEADLINE_S) == " tok"
    assert caller.is_alive() and pieces.empty()
    hold.touch()
    caller.join(timeout=DEADLINE_S)
    assert not caller.is_alive() and results[0].status == 200
    assert results[0].region == EAST and results[0].body == {"text": " tok" * TOKENS, "events": TOKENS}
