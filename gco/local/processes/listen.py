"""Where the local stack's servers listen: loopback only, on a free port, with a deep backlog.

`LOOPBACK` is the only address any local server binds; `free_port` finds a port for one. The listen
backlog of the local stack's HTTP servers (the moto server, the stand-in API servers):

Python's servers listen with a backlog of 5 (`socketserver`) or 128 (werkzeug's). The local stack's
servers take bursts of new connections: moto's clients opened one per request while its server
closed each after its response (`gco.local.moto.keep_alive` keeps them now, but a burst of new
clients still connects at once), and the concurrent lists and applies of a poll's batches open a
stand-in's connection pool at once. A connection the backlog cannot hold is dropped by the kernel
and the client's SYN is sent again only after a second (Linux's initial retransmission timeout), so
one dropped connection held a whole poll's batches for a second or more: at 1,000 endpoints written
at once, about 40 connections a run were dropped (`ListenOverflows` and `TCPSynRetrans` in
/proc/net/netstat). A real DynamoDB or EKS endpoint does not drop connections at that rate. The
kernel caps a backlog at `net.core.somaxconn` (4096 on current Linux).
"""

from __future__ import annotations

import socket

LISTEN_BACKLOG = 1024
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A loopback port free at the time of asking (its server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])
