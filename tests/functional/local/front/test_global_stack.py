"""The global address of `gco local up` as a user meets it: `env --with-key`, `invoke` without
`--region` naming the Region that answered, `fail-region`/`restore-region`, and the OpenAI Python SDK
with nothing but `base_url` and `api_key` getting a completion and a stream."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest

from gco.inference.invoke import API_KEY_ENV, GLOBAL_URL_ENV
from tests.functional.local.conftest import eventually
from tests.functional.local.test_local_stack import IMAGE, MODEL, REGIONS, Gco

EAST, WEST = REGIONS
pytestmark = pytest.mark.slow  # a whole `gco local up` each (tens of seconds)


@dataclass
class Stack:
    gco: Gco
    flag: tuple[str, str]  # --state-dir D


@pytest.fixture
def stack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Stack]:
    """A stack of two Regions with `smol` running in both; the environment `env --with-key` prints."""
    gco = Gco(capsys)
    flag = ("--state-dir", str(tmp_path / "state"))
    gco("local", "up", "--regions", ",".join(REGIONS), *flag)
    try:
        for line in gco("local", "env", "--with-key", *flag).splitlines():
            if line.startswith("#"):
                continue  # a hint, not a variable
            name, _, value = line.removeprefix("export ").partition("=")
            monkeypatch.setenv(name, shlex.split(value)[0])
        deploy = ["inference", "deploy", "smol", "--image", IMAGE, "--model-id", MODEL]
        try:
            gco(*deploy, "--region", EAST, "--region", WEST, "--wait", "--timeout", "60")
        except AssertionError as error:  # what each Region's process and nginx said meanwhile
            raise AssertionError(f"{error}\n{region_logs(tmp_path / 'state')}") from None
        yield Stack(gco, flag)
    finally:
        gco("local", "down", *flag)


def region_logs(state_dir: Path, lines: int = 40) -> str:
    """The last `lines` of each Region process's log and of each Region's nginx log (without the
    global address's health checks, which fill it)."""
    parts = []
    for log in sorted(state_dir.glob("region-*.log")) + sorted(state_dir.glob("*/*/nginx/nginx.log")):
        kept = [line for line in log.read_text(errors="replace").splitlines() if "GET /healthz" not in line]
        parts.append(f"--- {log.relative_to(state_dir)}\n" + "\n".join(kept[-lines:]))
    return "\n".join(parts)


def answered(gco: Gco) -> str:
    result = json.loads(gco("inference", "invoke", "smol", "-o", "json"))
    assert result["status"] == 200 and result["body"]["model"] == MODEL
    return str(result["region"])


def test_invoke_fail_and_restore_a_region(stack: Stack) -> None:
    gco, state = stack.gco, stack.flag
    assert answered(gco) == EAST
    assert f"{EAST} (through the global address) 200" in gco("inference", "invoke", "smol")
    assert gco("local", "fail-region", EAST, *state).strip() == f"{EAST}: proxy stopped"
    assert answered(gco) == WEST
    assert f"not answering: region {EAST}" in gco("local", "status", *state, code=1)
    gco("local", "restore-region", EAST, *state)
    # The health checker passes the Region again after FAILURE_THRESHOLD good checks (Route 53's rule).
    eventually(lambda: answered(gco) == EAST, f"{EAST} judged healthy again")
    gco("local", "fail-region", EAST, "--unready", "smol", *state)
    assert answered(gco) == WEST
    gco("local", "restore-region", EAST, *state)
    # Ready again at the next probe (the record may say `updating 0/1` until the next sweep).
    eventually(lambda: answered(gco) == EAST, f"{EAST} serving smol again")
    assert "is not a Region of the stack" in gco("local", "fail-region", "eu-west-1", *state, code=2)


def test_fail_region_unready_refuses_an_endpoint_it_cannot_fail(stack: Stack) -> None:
    """`--unready` of an endpoint that does not exist, or is not served in the Region, fails nothing:
    it says so and exits non-zero, and no fault is recorded (the Region still answers)."""
    gco, state = stack.gco, stack.flag
    missing = gco("local", "fail-region", EAST, "--unready", "nope", *state, code=1)
    assert "endpoint 'nope' not found" in missing
    gco("inference", "deploy", "west-only", "--image", IMAGE, "--model-id", MODEL, "--region", WEST)
    refused = gco("local", "fail-region", EAST, "--unready", "west-only", *state, code=2)
    assert f"--unready: 'west-only' is not served in {EAST} (its Regions: {WEST})" in refused
    assert answered(gco) == EAST


def test_the_openai_sdk_gets_a_completion_and_a_stream(stack: Stack) -> None:
    client = openai.OpenAI(
        base_url=f"{os.environ[GLOBAL_URL_ENV]}/inference/smol/v1",
        api_key=os.environ[API_KEY_ENV],
        max_retries=0,
    )
    completion = client.completions.create(model=MODEL, prompt="hi", max_tokens=4)
    assert completion.model == MODEL and completion.choices[0].text
    chat = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4
    )
    assert chat.choices[0].message.content
    pieces = [
        chunk.choices[0].delta.content or ""
        for chunk in client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4, stream=True
        )
        if chunk.choices
    ]
    assert len([piece for piece in pieces if piece]) >= 2
    refused = openai.OpenAI(base_url=client.base_url, api_key="gco-000000000000-" + "A" * 43, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        refused.completions.create(model=MODEL, prompt="hi", max_tokens=4)
    # the deployed authorizer's refusal, answered with the global API's own 401 gateway response (API
    # Gateway tells the caller nothing of why: stacks/constructs/global_front_door.py)
    assert "a valid gco key is required" in str(caught.value)
    assert caught.value.body is not None and "invalid_api_key" in str(caught.value.body)
