"""Kernel receive timestamps for the load client's reads, mapped onto the monotonic clock.

With `SO_TIMESTAMPNS` set on a socket, Linux stamps each incoming packet (`skb`) when it enters the
receive stack and `recvmsg` returns the stamp in an `SCM_TIMESTAMPNS` control message
(Documentation/networking/timestamping.rst, "SO_TIMESTAMPNS": "same timestamping mechanism as
SO_TIMESTAMP, but reports the timestamp as struct timespec in nsec resolution"). For TCP the stamp
is the one of the last byte the read returned (kernel commit 98aaa913b4ed, "tcp: Extend
SOF_TIMESTAMPING_RX_SOFTWARE to TCP recvmsg": "maintain the invariant of returning the timestamp of
the last byte in the recvmsg buffer"; coalesced packets keep the later stamp). On loopback the packet
is stamped in the sender's transmit path: `loopback_xmit` (drivers/net/loopback.c) clears the stamp
("do not fool net_timestamp_check()") and hands the packet to `__netif_rx`, which stamps it as it is
queued (net/core/dev.c, `netif_rx_internal` -> `net_timestamp_check`). So a read's stamp is when its
last byte reached this machine's receive path, however late the client's event loop woke up; never
earlier than the bytes were there.

The kernel stamps with `CLOCK_REALTIME` (`ktime_get_real`), and every other time of the client is
`time.perf_counter_ns` (`CLOCK_MONOTONIC` on Linux). Both are the kernel's one timekeeper; realtime
is monotonic plus an offset that NTP's frequency slewing leaves alone (clock_gettime(2): monotonic
"is affected by the incremental adjustments performed by adjtime(3) and NTP"; realtime alone "is
affected by discontinuous jumps in the system time"). The offset is sampled at each pass over the
ready sockets (`offset_ns`: realtime first, then monotonic, so the sampled offset is at most the true
one and a mapped stamp can only come out late, never early), and a stamp outside [request written,
read] (a jump of the realtime clock since the sample) is not used: the read's own time is.

A kernel may accept the option and still stamp nothing: a sandbox's user-space network stack (gVisor's
netstack, for one) takes the `setsockopt` and returns TCP reads without the control message. Every
read then keeps its own time, as on a platform without the option, and `kernel_stamps` in the
records says how many reads the kernel timed; `loopback_stamps` asks the kernel once.
"""

from __future__ import annotations

import platform
import socket
import struct
import sys
import time
from collections.abc import Callable, Sequence
from functools import cache

# include/uapi/asm-generic/socket.h: SO_TIMESTAMPNS_OLD 35 (= SCM_TIMESTAMPNS); on a 64-bit `long`
# SO_TIMESTAMPNS is SO_TIMESTAMPNS_OLD and its control message a struct timespec of two 64-bit
# longs. Python's socket module does not define it. Only the architectures that use the generic
# numbers are trusted (alpha, mips, parisc, powerpc and sparc have their own).
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
_TIMESPEC = struct.Struct("=qq")
_GENERIC_64_BIT = frozenset({"x86_64", "amd64", "aarch64", "arm64", "riscv64"})
ANCILLARY_BYTES = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0

# A realtime read bracketed by monotonic reads further apart than this was preempted: sampled again.
OFFSET_GAP_NS = 20_000
OFFSET_TRIES = 3
# The probe's reads before it concludes the kernel stamps nothing (`loopback_stamps`): the kernel
# switches stamping on from a work queue, which a busy machine may run late.
PROBE_READS = 50
PROBE_PAUSE_S = 0.02

Ancillary = Sequence[tuple[int, int, bytes]]
Clock = Callable[[], int]


def supported(system: str = sys.platform, machine: str | None = None) -> bool:
    """Whether this platform gives `SO_TIMESTAMPNS` with the generic number and layout (Linux, 64-bit)."""
    arch = (machine if machine is not None else platform.machine()).lower()
    return system == "linux" and arch in _GENERIC_64_BIT and ANCILLARY_BYTES > 0


def enable(sock: socket.socket) -> bool:
    """Ask the kernel to stamp what `sock` receives; whether it will (False where unsupported)."""
    if not supported():
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


@cache
def loopback_stamps() -> bool:
    """Whether this kernel stamps a TCP read on loopback: one probe (a connection to itself, a byte at
    a time until a read carries a stamp or `PROBE_READS` reads did not), asked once a process. False
    where the option is unsupported or accepted and ignored.

    Why more than one byte: while no socket of the machine asks for stamps, the kernel switches
    stamping on from a work queue, after the `setsockopt` has returned (net/core/dev.c,
    `net_enable_timestamp`: with `netstamp_wanted` at 0 it counts the request in
    `netstamp_needed_deferred` and calls `schedule_work(&netstamp_work)`, which enables the
    `netstamp_needed_key` static branch later), so the first packets after it may go unstamped.
    """
    try:
        with socket.create_server(("127.0.0.1", 0)) as server:
            client = socket.create_connection(server.getsockname(), timeout=5)
            peer, _ = server.accept()
            with client, peer:
                if not enable(client):
                    return False
                return stamped_read(peer, client) is not None
    except OSError:
        return False


def stamped_read(writer: socket.socket, reader: socket.socket, reads: int = 0) -> int | None:
    """Send a byte from `writer` to `reader` until a read carries the kernel's stamp (returned) or
    `reads` reads (`PROBE_READS` where 0) did not (None), `PROBE_PAUSE_S` apart; `reader` has stamps
    enabled and a timeout set."""
    for attempt in range(reads or PROBE_READS):
        if attempt:
            time.sleep(PROBE_PAUSE_S)
        writer.sendall(b"!")
        _, ancillary, _, _ = reader.recvmsg(1, ANCILLARY_BYTES)
        stamp = kernel_realtime_ns(ancillary)
        if stamp is not None:
            return stamp
    return None


def kernel_realtime_ns(ancillary: Ancillary) -> int | None:
    """The `SCM_TIMESTAMPNS` stamp of a `recvmsg` (CLOCK_REALTIME, ns), None when it carried none."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(data)
            if seconds or nanoseconds:  # an empty stamp: the packet was not stamped
                return int(seconds) * 1_000_000_000 + int(nanoseconds)
    return None


def offset_ns(realtime: Clock = time.time_ns, monotonic: Clock = time.perf_counter_ns) -> int:
    """Realtime minus monotonic now, realtime read first: at most the true offset, so that a stamp
    mapped with it (`arrival_at`) can only come out late, by the time between the two reads.

    The realtime read is bracketed by two monotonic ones; a bracket wider than `OFFSET_GAP_NS` (the
    process was preempted in between, which would make every stamp of the pass late by as much) is
    sampled again, `OFFSET_TRIES` times at most, and the tightest is used.
    """
    best_gap, best = -1, 0
    for _ in range(OFFSET_TRIES):
        before = monotonic()
        real = realtime()
        after = monotonic()
        if best_gap < 0 or after - before < best_gap:
            best_gap, best = after - before, real - after
        if best_gap <= OFFSET_GAP_NS:
            break
    return best


def arrival_at(ancillary: Ancillary, read_ns: int, sent_ns: int, offset: int) -> tuple[int, bool]:
    """When a read's last byte arrived on the monotonic clock, and whether the kernel said so.

    Parameters:
        ancillary: the read's control messages (`socket.recvmsg`).
        read_ns: the monotonic time taken just after the read returned.
        sent_ns: the monotonic time the request was written (no answer arrives before it).
        offset: realtime minus monotonic, sampled before the read (`offset_ns`).

    Returns:
        The kernel's stamp mapped onto the monotonic clock where there is one and it lies within
        [sent_ns, read_ns]; `read_ns` otherwise. The flag says which.
    """
    level, kind, data = ancillary[0] if len(ancillary) == 1 else (0, 0, b"")
    if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
        seconds, nanoseconds = _TIMESPEC.unpack_from(data)  # the usual read: its stamp alone
        stamp: int | None = seconds * 1_000_000_000 + nanoseconds if seconds or nanoseconds else None
    else:
        stamp = kernel_realtime_ns(ancillary)
    if stamp is None:
        return read_ns, False
    mapped = stamp - offset
    if sent_ns <= mapped <= read_ns:
        return mapped, True
    return read_ns, False


def arrival_ns(
    ancillary: Ancillary,
    read_ns: int,
    sent_ns: int,
    realtime: Clock = time.time_ns,
    monotonic: Clock = time.perf_counter_ns,
) -> tuple[int, bool]:
    """`arrival_at` with the offset sampled now, after the read (`realtime`, `monotonic` injected in
    tests): for a caller that reads one socket at a time."""
    if kernel_realtime_ns(ancillary) is None:
        return read_ns, False
    return arrival_at(ancillary, read_ns, sent_ns, offset_ns(realtime, monotonic))
