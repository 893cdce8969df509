"""Kernel receive stamps: the control message read, mapped onto the monotonic clock with injected
clocks, and refused where they cannot be true; then the real thing on a loopback socket."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from gco.bench.clients import rxstamp

S = 1_000_000_000
OFFSET = 1_700_000_000 * S  # realtime minus monotonic on the injected clocks


def stamp(ns: int) -> list[tuple[int, int, bytes]]:
    return [(socket.SOL_SOCKET, rxstamp.SCM_TIMESTAMPNS, struct.pack("=qq", ns // S, ns % S))]


def clocks(mono_ns: int, gap_ns: int = 0) -> tuple[rxstamp.Clock, rxstamp.Clock]:
    """Realtime read at `mono_ns`, monotonic `gap_ns` later (the order `arrival_ns` reads them in)."""
    return (lambda: mono_ns + OFFSET), (lambda: mono_ns + gap_ns)


def test_the_kernel_stamp_is_read_from_its_control_message_and_others_are_ignored() -> None:
    other = (socket.SOL_SOCKET, socket.SCM_RIGHTS, b"\x00" * 16)
    assert rxstamp.kernel_realtime_ns([other, *stamp(5 * S + 123)]) == 5 * S + 123
    assert rxstamp.kernel_realtime_ns([other]) is None
    assert rxstamp.kernel_realtime_ns([(socket.SOL_SOCKET, rxstamp.SCM_TIMESTAMPNS, b"\x01")]) is None
    assert rxstamp.kernel_realtime_ns(stamp(0)) is None  # an empty stamp: the packet was not stamped


def test_a_stamp_is_mapped_onto_the_monotonic_clock_and_used_within_send_and_read() -> None:
    realtime, monotonic = clocks(mono_ns=10 * S)
    arrived = OFFSET + 10 * S - 300_000  # 0.3 ms before the read
    assert rxstamp.arrival_ns(stamp(arrived), 10 * S, 9 * S, realtime, monotonic) == (10 * S - 300_000, True)


def test_the_offset_sampled_across_a_gap_can_only_make_the_stamp_later() -> None:
    realtime, monotonic = clocks(mono_ns=10 * S, gap_ns=2_000)
    arrived = OFFSET + 10 * S - 300_000
    mapped, kernel = rxstamp.arrival_ns(stamp(arrived), 10 * S + 5_000, 9 * S, realtime, monotonic)
    assert kernel
    assert mapped == 10 * S - 300_000 + 2_000


@pytest.mark.parametrize(
    "arrived",
    [OFFSET + 9 * S - 1, OFFSET + 10 * S + 1],  # before the request was written; after the read
    ids=["before-the-send", "after-the-read"],
)
def test_a_stamp_outside_send_and_read_is_not_used_the_read_time_is(arrived: int) -> None:
    realtime, monotonic = clocks(mono_ns=10 * S)
    assert rxstamp.arrival_ns(stamp(arrived), 10 * S, 9 * S, realtime, monotonic) == (10 * S, False)


def test_without_a_stamp_the_read_time_is_used() -> None:
    assert rxstamp.arrival_ns([], 10 * S, 9 * S) == (10 * S, False)


def test_only_linux_on_the_generic_64_bit_numbers_is_trusted() -> None:
    assert rxstamp.supported("linux", "x86_64")
    assert rxstamp.supported("linux", "aarch64")
    assert not rxstamp.supported("darwin", "arm64")
    assert not rxstamp.supported("linux", "sparc64")
    assert not rxstamp.supported("linux", "ppc64le")


@pytest.mark.skipif(
    not rxstamp.loopback_stamps(),
    reason="this kernel does not stamp TCP reads (SO_TIMESTAMPNS unsupported, or accepted and ignored)",
)
def test_a_loopback_read_carries_a_kernel_stamp_between_the_write_and_the_read() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname(), timeout=10)
        peer, _ = server.accept()
        with client, peer:
            assert rxstamp.enable(client)
            client.settimeout(10)
            # the kernel switches stamping on from a work queue once a socket asks (rxstamp.loopback_stamps)
            assert rxstamp.stamped_read(peer, client) is not None
            written = time.perf_counter_ns()
            peer.sendall(b"first token")
            data, ancillary, _, _ = client.recvmsg(64, rxstamp.ANCILLARY_BYTES)
            read = time.perf_counter_ns()
    assert data == b"first token"
    assert rxstamp.kernel_realtime_ns(ancillary) is not None
    mapped, kernel = rxstamp.arrival_ns(ancillary, read, written)
    assert kernel  # the mapped stamp fell inside [written, read]: the order the bytes really took
    assert written <= mapped <= read


def test_the_probe_says_no_where_the_platform_is_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    rxstamp.loopback_stamps.cache_clear()
    monkeypatch.setattr(rxstamp, "supported", lambda: False)
    try:
        assert not rxstamp.loopback_stamps()
    finally:
        rxstamp.loopback_stamps.cache_clear()


def test_the_probe_says_no_where_the_kernel_accepts_the_option_and_stamps_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sandbox's network stack (gVisor) takes the setsockopt and returns reads without the stamp."""
    real_recvmsg = socket.socket.recvmsg

    def without_control_messages(
        sock: socket.socket, *args: int
    ) -> tuple[bytes, list[tuple[int, int, bytes]], int, object]:
        data, _, flags, address = real_recvmsg(sock, *args)
        return data, [], flags, address

    rxstamp.loopback_stamps.cache_clear()
    monkeypatch.setattr(socket.socket, "recvmsg", without_control_messages)
    try:
        assert not rxstamp.loopback_stamps()
    finally:
        rxstamp.loopback_stamps.cache_clear()


@pytest.mark.skipif(not rxstamp.loopback_stamps(), reason="this kernel does not stamp TCP reads")
def test_the_probe_waits_for_the_kernel_to_switch_stamping_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel enables stamping from a work queue: the first reads after the setsockopt may carry
    no stamp (net/core/dev.c `net_enable_timestamp`). Three unstamped reads, then the kernel's own."""
    real_recvmsg = socket.socket.recvmsg
    reads: list[bool] = []

    def late(sock: socket.socket, *args: int) -> tuple[bytes, list[tuple[int, int, bytes]], int, object]:
        data, ancillary, flags, address = real_recvmsg(sock, *args)
        reads.append(len(reads) >= 3)
        return data, ancillary if reads[-1] else [], flags, address

    rxstamp.loopback_stamps.cache_clear()
    monkeypatch.setattr(socket.socket, "recvmsg", late)
    try:
        assert rxstamp.loopback_stamps()
        assert reads[:4] == [False, False, False, True]
    finally:
        rxstamp.loopback_stamps.cache_clear()


def test_an_offset_sampled_across_a_preemption_is_sampled_again_and_the_tightest_kept() -> None:
    monotonic_reads = iter([10 * S, 10 * S + 900_000, 11 * S, 11 * S + 300, 12 * S, 12 * S + 100_000])
    realtime_reads = iter([OFFSET + 10 * S, OFFSET + 11 * S + 100, OFFSET + 12 * S])
    offset = rxstamp.offset_ns(lambda: next(realtime_reads), lambda: next(monotonic_reads))
    assert offset == OFFSET - 200  # the second try: bracketed within 300 ns, realtime 200 ns before its end


def test_every_try_preempted_keeps_the_tightest_and_stops_after_the_last() -> None:
    gaps = [500_000, 90_000, 300_000]
    monotonic_reads = iter([value for gap in gaps for value in (0, gap)])
    realtime_reads = iter([OFFSET, OFFSET, OFFSET])
    assert rxstamp.offset_ns(lambda: next(realtime_reads), lambda: next(monotonic_reads)) == OFFSET - 90_000


def test_a_stamp_mapped_with_an_offset_sampled_for_the_pass() -> None:
    arrived = OFFSET + 10 * S - 300_000
    assert rxstamp.arrival_at(stamp(arrived), 10 * S, 9 * S, OFFSET) == (10 * S - 300_000, True)
    assert rxstamp.arrival_at(stamp(arrived), 10 * S - 300_001, 9 * S, OFFSET) == (10 * S - 300_001, False)
    assert rxstamp.arrival_at([], 10 * S, 9 * S, OFFSET) == (10 * S, False)
    other = (socket.SOL_SOCKET, socket.SCM_RIGHTS, b"\x00" * 16)
    assert rxstamp.arrival_at([other, *stamp(arrived)], 10 * S, 9 * S, OFFSET) == (10 * S - 300_000, True)
    assert rxstamp.arrival_at(stamp(0), 10 * S, 9 * S, OFFSET) == (10 * S, False)
