"""A server that accepts and never answers: every server-calling command ends, within its
--request-timeout, in one line naming the call it waited for (exit 1); the bound covers every
attempt of a call together, so the one attempt sent takes the whole bound and no second is sent."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from botocore.exceptions import BotoCoreError

from gco import aws
from gco.cli import main

REQUEST_TIMEOUT = "1"
BOUND_S = 15.0  # two attempts of 1 s, backoff and start-up, with a wide margin for a loaded machine


@dataclass
class SilentServer:
    """A loopback port that accepts every connection, counts it, and never answers."""

    url: str
    accepted: list[socket.socket] = field(default_factory=list)


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        server = SilentServer(f"http://127.0.0.1:{listener.getsockname()[1]}")

        def accept() -> None:
            while True:
                try:
                    server.accepted.append(listener.accept()[0])
                except OSError:  # the listener closed: the test is over
                    return

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        yield server
        listener.shutdown(socket.SHUT_RDWR)
    thread.join(timeout=5)
    for connection in server.accepted:
        connection.close()


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
    silent_server: SilentServer, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    started = time.monotonic()
    status = main([*args, "--endpoint-url", silent_server.url, "--request-timeout", REQUEST_TIMEOUT])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert status == 1 and err.count("\n") == 1, err
    assert "DynamoDB" in err and "timeout" in err.lower() and silent_server.url in err, err
    assert elapsed < BOUND_S, elapsed
    # The one attempt read for the whole --request-timeout: no time was left for a second.
    assert len(silent_server.accepted) == 1


def test_a_stopped_endpoint_costs_one_request_timeout_in_total_retries_included(
    silent_server: SilentServer,
) -> None:
    """On an injected clock that passes the bound while the first attempt waits, the call ends
    with no second attempt sent (the fixed per-attempt timeout of before sent two: 61.6 s for 30 s)."""
    now = [100.0]

    def clock() -> float:
        if silent_server.accepted:  # the first attempt is waiting: its whole bound has passed
            now[0] = 100.0 + 30.0
        return now[0]

    aws.bound_requests(30.0, clock=clock)
    try:
        client = aws.client("dynamodb", region="us-east-1", endpoint_url=silent_server.url)
        client.meta.events.register(
            "before-send", lambda request, **_: request.context.update(read_timeout=0.2)
        )
        with pytest.raises(BotoCoreError, match="Read timeout on endpoint URL") as caught:
            client.list_tables()
    finally:
        aws.reset_request_bounds()
    assert len(silent_server.accepted) == 1, caught.value


def test_no_attempt_is_sent_once_the_bound_has_passed(silent_server: SilentServer) -> None:
    ticks = iter([0.0, 31.0, 31.0, 31.0])
    aws.bound_requests(30.0, clock=lambda: next(ticks))
    try:
        client = aws.client("dynamodb", region="us-east-1", endpoint_url=silent_server.url)
        with pytest.raises(
            BotoCoreError, match=r"no answer within --request-timeout 30 s \(attempts sent: 0\)"
        ):
            client.list_tables()
    finally:
        aws.reset_request_bounds()
    assert silent_server.accepted == []


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "3601"])
def test_a_bad_request_timeout_is_bad_input(capsys: pytest.CaptureFixture[str], value: str) -> None:
    assert main(["inference", "list", "--request-timeout", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--request-timeout" in err, err
