"""The client's poller on real loopback sockets: one pass reads every ready socket, with one offset,
and a socket removed is read no more; nested (one epoll) and flat (each socket a loop reader) alike."""

from __future__ import annotations

import asyncio
import socket

import pytest

from gco.bench.clients.poller import Poller

BOUND = 500  # loop turns at most while waiting for the reads (a bounded wait, never a timed assertion)


def pairs(count: int) -> list[tuple[socket.socket, socket.socket]]:
    made = []
    for _ in range(count):
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        made.append((ours, theirs))
    return made


@pytest.mark.parametrize("nested", [True, False], ids=["one-epoll", "a-reader-each"])
def test_every_ready_socket_is_read_and_a_removed_one_no_more(nested: bool) -> None:
    async def scenario() -> None:
        poller = Poller(asyncio.get_running_loop(), nested=nested)
        sockets = pairs(3)
        reads: list[tuple[int, bytes, int]] = []

        def reader(index: int, sock: socket.socket) -> None:
            def read(offset: int) -> None:
                reads.append((index, sock.recv(64), offset))

            poller.add(sock.fileno(), read)

        try:
            for index, (ours, _) in enumerate(sockets):
                reader(index, ours)
            for index, (_, theirs) in enumerate(sockets):
                theirs.send(b"token %d" % index)
            for _ in range(BOUND):
                if len(reads) == 3:
                    break
                await asyncio.sleep(0)
            assert sorted((index, data) for index, data, _ in reads) == [
                (0, b"token 0"),
                (1, b"token 1"),
                (2, b"token 2"),
            ]
            assert all(offset > 0 for _, _, offset in reads)  # realtime minus monotonic, sampled
            poller.remove(sockets[1][0].fileno())
            sockets[1][1].send(b"late")
            sockets[0][1].send(b"again")
            for _ in range(BOUND):
                if len(reads) == 4:
                    break
                await asyncio.sleep(0)
            for _ in range(5):  # a few more turns: the removed socket's bytes stay unread
                await asyncio.sleep(0)
            assert [(index, data) for index, data, _ in reads[3:]] == [(0, b"again")]
            assert sockets[1][0].recv(64) == b"late"
        finally:
            poller.close()
            for ours, theirs in sockets:
                ours.close()
                theirs.close()
        assert poller.readers == {}
        poller.remove(sockets[0][0].fileno())  # after close: nothing to do, no error

    asyncio.run(scenario())


def test_a_pass_reads_at_most_a_batch_and_the_rest_in_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gco.bench.clients.poller.BATCH", 2)

    async def scenario() -> None:
        poller = Poller(asyncio.get_running_loop())
        if poller.epoll is None:
            pytest.skip("no epoll on this platform: each socket is its own reader")
        sockets = pairs(5)
        reads: list[int] = []
        try:

            def reader(index: int, sock: socket.socket) -> None:
                def read(_: int) -> None:
                    reads.append(index)
                    sock.recv(64)

                poller.add(sock.fileno(), read)

            for index, (ours, _) in enumerate(sockets):
                reader(index, ours)
            for _, theirs in sockets:
                theirs.send(b"x")
            for _ in range(BOUND):  # the descriptor is ready; one pass is called by hand here
                if poller.epoll.poll(0):
                    break
                await asyncio.sleep(0)
            poller.ready()
            assert len(reads) == 2
            for _ in range(BOUND):
                if len(reads) == 5:
                    break
                await asyncio.sleep(0)
            assert sorted(reads) == [0, 1, 2, 3, 4]
        finally:
            poller.close()
            for ours, theirs in sockets:
                ours.close()
                theirs.close()

    asyncio.run(scenario())
