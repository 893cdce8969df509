"""The cell's port check: a listener is "in use", a closed port and a self-connection are not."""

from __future__ import annotations

import socket

from gco.bench.rounds.cell import port_in_use, reaches_listener
from gco.local.processes.listen import LOOPBACK


def test_a_listening_port_is_in_use() -> None:
    with socket.socket() as server:
        server.bind((LOOPBACK, 0))
        server.listen(1)
        assert port_in_use(server.getsockname()[1])


def test_a_closed_port_is_not_in_use() -> None:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port = probe.getsockname()[1]
    assert not port_in_use(port)


def test_a_connection_to_itself_is_not_a_listener() -> None:
    # The source port equal to the target port: the kernel's simultaneous open connects the
    # socket to itself, as happens by chance when the ephemeral port picked equals the target.
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port = sock.getsockname()[1]
        assert not reaches_listener(sock, port)
