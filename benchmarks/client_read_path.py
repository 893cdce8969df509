"""The load client's read path alone: CPU per read of `gco bench serve`'s connections.

N keep-alive connections to a loopback socket of this process, each with a streamed answer begun;
each round writes one token chunk (the fake engine's) to every connection, then lets the event loop
turn until the client has read them all, timing only those turns (`time.process_time`: this
process's CPU, the writes outside). What it measures is the client's own cost per read (wake-up,
`recvmsg`, receive stamp, parse), without a server on the same core and without the coalescing a
late client gets. Pin it to one core for steadier figures (`taskset -c 1`); on a shared machine it
moves with the load, so compare trees in alternation.

    .venv/bin/python benchmarks/client_read_path.py [--connections 200] [--rounds 49]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gco.bench.clients.transport import Client, Started  # noqa: E402
from gco.bench.fake_engine import wire  # noqa: E402

TURNS = 1000  # loop turns at most per round while the reads come in


async def measure(connections: int, rounds: int) -> tuple[float, int]:
    """CPU seconds spent reading, and the reads, over `rounds` of one chunk per connection."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=max(128, connections))
    client = Client(f"http://127.0.0.1:{listener.getsockname()[1]}")
    peers: list[socket.socket] = []
    try:
        await client.pool.open_ahead(connections)
        peers = [listener.accept()[0] for _ in range(connections)]
        started = [client.start(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n") for _ in range(connections)]
        streams = [s for s in started if isinstance(s, Started)]
        for peer in peers:
            peer.recv(4096)
            peer.sendall(wire.SSE_HEAD)
        chunk, cpu, reads = wire.TOKEN_CHUNK[False], 0.0, 0
        for _ in range(rounds):
            before = sum(len(s.parser.marks) for s in streams)
            for peer in peers:
                peer.sendall(chunk)
            for _ in range(TURNS):  # only the loop's turns are timed, not the counting between them
                began = time.process_time()
                await asyncio.sleep(0)
                cpu += time.process_time() - began
                if sum(len(s.parser.marks) for s in streams) - before >= len(streams):
                    break
            reads += sum(len(s.parser.marks) for s in streams) - before
        return cpu, reads
    finally:
        client.close()
        for peer in peers:
            peer.close()
        listener.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=49)
    args = parser.parse_args()
    cpu, reads = asyncio.run(measure(args.connections, args.rounds))
    print(
        f"{args.connections} connections x {args.rounds} rounds: {reads} reads, "
        f"CPU per read {cpu / max(1, reads) * 1e6:.2f} us"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
