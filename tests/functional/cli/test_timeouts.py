"""A server that accepts and never answers: every server-calling command ends, within its
--request-timeout, in one line naming the call it waited for (exit 1)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from gco.cli import main

REQUEST_TIMEOUT = "1"
BOUND_S = 15.0  # two attempts of 1 s, backoff and start-up, with a wide margin for a loaded machine


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback port whose connections the kernel accepts (backlog) and nothing ever answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


@pytest.mark.parametrize(
    "args",
    [
        ("inference", "list"),
        ("inference", "status", "chat"),
        ("inference", "stop", "chat"),
        ("inference", "scale", "chat", "--replicas", "2"),
        ("inference", "canary", "chat", "--image", "x:1", "--weight", "5"),
        ("inference", "delete", "chat"),
    ],
)
def test_a_silent_server_ends_the_command_naming_the_call(
    silent_server: str, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    started = time.monotonic()
    status = main([*args, "--endpoint-url", silent_server, "--request-timeout", REQUEST_TIMEOUT])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert status == 1 and err.count("\n") == 1, err
    assert "DynamoDB" in err and "timeout" in err.lower() and silent_server in err, err
    assert elapsed < BOUND_S, elapsed


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "3601"])
def test_a_bad_request_timeout_is_bad_input(capsys: pytest.CaptureFixture[str], value: str) -> None:
    assert main(["inference", "list", "--request-timeout", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--request-timeout" in err, err
