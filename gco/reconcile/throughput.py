"""How the stream path is sized: a cost model of one reconcile, and the settings chosen from it.

Pure arithmetic, so the Regional stack (the event source mapping) and the handler (its
concurrency) import the same numbers, and `docs/scale.md` explains them.

One reconcile of a new or changed endpoint is a few *sequential rounds*; each round is one
network round trip, however many calls it carries, because the calls of a round are issued
concurrently (`Reconciler`, `KubeCluster`):

1. the strongly consistent read of the record (GetItem to the home Region);
2. the lists of the endpoint's objects (one per kind and namespace where they can be, concurrently);
3. the server-side applies of what differs (concurrently; deletes likewise);
4. the fenced status write (UpdateItem to the home Region).

So a reconcile costs `2 x store round trip + 2 x API-server round trip`, and a batch of `n`
distinct endpoints with handler concurrency `c` costs `ceil(n / c)` reconciles plus one refresh of
the proxy's routes when a route changed. A shard delivers at most `parallelization` batches at
once (Lambda's ParallelizationFactor, order kept per partition key: per endpoint), so one shard
drains `parallelization x batch_size / batch_seconds` records a second; past that rate the
iterator age (and every write's latency) grows without bound.

A batch is counted in *records*, and most records need no reconcile: a write puts
`RECORDS_PER_WRITE` records in each Region's stream of which `RECONCILES_PER_WRITE` are reconciled
(the rest are status echoes, skipped without I/O). So a full batch of `b` records holds about
`b x RECONCILES_PER_WRITE / RECORDS_PER_WRITE` reconciles, and a shard drains
`RECORDS_PER_WRITE` records for every write: a model that counted a write as its 2 reconciles
overstated the writes a shard keeps up with by 2.5x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gco.aws import MAX_POOL_CONNECTIONS

# Each write of a new endpoint puts, in every Region's stream: its INSERT, and per Region two
# status writes (creating, then running). Only the INSERT and the Region's own progressing echo
# are reconciled; the rest are skipped without I/O (`handler.is_status_echo`).
RECONCILES_PER_WRITE = 2
# The Regions of the design workload's endpoints (the benchmark's: 2). Each Region's stream carries
# every Region's status writes, so a write is 1 + 2 x Regions records in each stream.
DESIGN_REGIONS = 2
RECORDS_PER_WRITE = 1 + 2 * DESIGN_REGIONS
# Reconciles in flight in one invocation: no more than the DynamoDB client's connection pool, or the
# extra threads only wait for a connection.
MAX_HANDLER_CONCURRENCY = MAX_POOL_CONNECTIONS


@dataclass(frozen=True)
class CostModel:
    """Seconds per round trip, and the rounds of one reconcile.

    Parameters:
        store_round_trip: one GetItem/UpdateItem to the home Region (cross-Region for a Regional
            reconciler: the Region pair's round trip dominates).
        kube_round_trip: one request to the Region's EKS API server from the Lambda's VPC.
        store_rounds, kube_rounds: sequential rounds of one reconcile (see the module docstring).
        route_refresh_rounds: API-server rounds of one refresh of the proxy's routes (per batch).
    """

    store_round_trip: float
    kube_round_trip: float
    store_rounds: int = 2
    kube_rounds: int = 2
    route_refresh_rounds: int = 3

    @property
    def reconcile_seconds(self) -> float:
        return self.store_rounds * self.store_round_trip + self.kube_rounds * self.kube_round_trip

    def batch_seconds(self, endpoints: int, concurrency: int) -> float:
        """One invocation over `endpoints` distinct endpoints reconciled `concurrency` at a time."""
        waves = math.ceil(max(1, endpoints) / max(1, concurrency))
        return waves * self.reconcile_seconds + self.route_refresh_rounds * self.kube_round_trip


@dataclass(frozen=True)
class StreamSettings:
    """The event source mapping and handler settings the stacks and the handler share."""

    parallelization_factor: int
    batch_size: int
    batching_window_seconds: int
    handler_concurrency: int

    @property
    def reconciles_per_batch(self) -> int:
        """Distinct endpoints a full batch reconciles, records mixed as a write puts them in the stream."""
        return max(1, math.ceil(self.batch_size * RECONCILES_PER_WRITE / RECORDS_PER_WRITE))

    def shard_capacity(self, model: CostModel) -> float:
        """Records a second one shard drains with every batch full."""
        per_batch = model.batch_seconds(self.reconciles_per_batch, self.handler_concurrency)
        return self.parallelization_factor * self.batch_size / (per_batch + self.batching_window_seconds)

    def write_capacity(self, model: CostModel) -> float:
        """Endpoint writes a second one shard keeps up with (each write is RECORDS_PER_WRITE records)."""
        return self.shard_capacity(model) / RECORDS_PER_WRITE


def choose(model: CostModel, writes_per_second: float, *, headroom: float = 2.0) -> StreamSettings:
    """The smallest settings that drain `writes_per_second` with `headroom`, batches finishing in one wave.

    - window 0: a window only saves invocations, and adds itself to every write's latency;
    - handler concurrency = batch size (up to the DynamoDB client's connection pool): a batch
      takes one reconcile, not one per endpoint, even when every record is a new endpoint's;
    - batch size: the smallest of 10, 25, 50, 100 that fits with a parallelization factor up to 10
      (a batch returns when its slowest endpoint does: small batches hold fewer endpoints back).
    """
    needed = writes_per_second * RECORDS_PER_WRITE * headroom
    best = StreamSettings(10, 100, 0, MAX_HANDLER_CONCURRENCY)
    for batch_size in (10, 25, 50, 100):
        for factor in range(1, 11):
            settings = StreamSettings(factor, batch_size, 0, min(batch_size, MAX_HANDLER_CONCURRENCY))
            if settings.shard_capacity(model) >= needed:
                return settings
    return best


# The measured model (docs/scale.md): in AWS a Regional reconciler reaches the home table across
# Regions (us-east-1 <-> eu-west-1 is about 75 ms a round trip; in-Region GetItem is single-digit
# ms) and its EKS API server in about 20 ms from the VPC (an apply about 30 ms); the design load is
# 1,000 endpoints written within 15 s (67 writes a second) on one shard.
AWS_MODEL = CostModel(store_round_trip=0.080, kube_round_trip=0.030)
DESIGN_WRITES_PER_SECOND = 1000 / 15
STREAM_SETTINGS = choose(AWS_MODEL, DESIGN_WRITES_PER_SECOND)
# The stream function's reserved concurrency: every batch of every shard in flight, for the shards a
# table of this size has (DynamoDB splits a stream into a shard per partition; 2 plan ahead).
PLANNED_SHARDS = 2
STREAM_RESERVED_CONCURRENCY = STREAM_SETTINGS.parallelization_factor * PLANNED_SHARDS
