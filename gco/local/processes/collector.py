"""The garbage collector of the local stack's stand-in servers (the moto server, the stand-in API servers).

moto keeps every table's items and stream records as many small Python objects, and a stand-in
API server every object it stores; each full collection of CPython's cyclic garbage collector
walks all of them while it holds the interpreter, stalling every request the process serves: at
1,000 endpoints written at once the moto server spent about a tenth of its CPU collecting, in
pauses of up to a quarter of a second, and a stand-in API server paused for up to 160 ms. DynamoDB
and the Kubernetes API server have no such pauses.
"""

from __future__ import annotations

import gc

# gc.set_threshold: Python's (700, 10, 10), but a full collection after 1,000 younger ones, not 10.
COLLECTOR_THRESHOLDS = (700, 10, 1000)


def collect_rarely() -> None:
    """Make full collections rare in this process from here on (call once, before serving).

    What the process loaded before serving is frozen (never walked again), and full collections run
    a hundred times less often (`COLLECTOR_THRESHOLDS`): in the moto server about 1.2 s of
    collecting instead of 2 s at 1,000 endpoints, the longest pause 35 ms instead of 265 ms.
    Reference cycles are still collected.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
