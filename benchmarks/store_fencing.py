"""Cost of fencing: the store's conditional writes against plain unconditioned writes, same run.

Starts a local moto server, then alternates rounds (to cancel drift) of:
  fenced   EndpointStore.create / .region_writes.update_region_status / .update_desired_state
           (conditions, parsed record)
  plain    client.put_item / update_item of the same items with the same SET clauses, no condition
and prints operations per second of each and the ratio (target: fenced costs at most 1.3x).

    .venv/bin/python benchmarks/store_fencing.py [--endpoints 100] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from gco import aws
from gco.endpoints import EndpointStore, init_table
from gco.endpoints.codec import to_attribute, to_item
from gco.endpoints.record import EndpointRecord
from gco.local.moto.motoserver import MotoServer

SPEC = {"image": "vllm/vllm-openai:v0.6.3", "model_id": "m", "replicas": 2}
REGIONS = ["us-east-1", "us-west-2"]


def timed(operation: Callable[[int], object], count: int) -> float:
    """Operations per second of `count` calls."""
    start = time.perf_counter()
    for index in range(count):
        operation(index)
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--endpoints", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    count = options.endpoints

    with MotoServer() as server:
        client = aws.client("dynamodb", endpoint_url=server.url)
        init_table(client, "fenced")
        init_table(client, "plain")
        store = EndpointStore(client, "fenced")
        records: dict[str, EndpointRecord] = {}
        template = store.create("template", SPEC, REGIONS, created_by="bench").model_dump(
            mode="json", exclude_none=True
        )
        results: dict[str, list[float]] = {
            "create": [],
            "create-plain": [],
            "status": [],
            "status-plain": [],
            "state": [],
            "state-plain": [],
        }

        for round_index in range(options.rounds):
            names = [f"r{round_index}-ep{index}" for index in range(count)]

            def fenced_create(index: int, names: list[str] = names) -> object:
                records[names[index]] = store.create(names[index], SPEC, REGIONS, created_by="bench")
                return records[names[index]]

            def plain_put(index: int, names: list[str] = names) -> object:
                item = {**template, "endpoint_name": names[index], "created_at": store.clock.now()}
                return client.put_item(TableName="plain", Item=to_item(item))

            def fenced_status(index: int, names: list[str] = names) -> object:
                record = records[names[index]]
                return store.region_writes.update_region_status(
                    record.endpoint_name,
                    "us-east-1",
                    "running",
                    replicas_ready=2,
                    replicas_desired=2,
                    expected_lifecycle_id=record.lifecycle_id,
                    expected_region_generation=record.region_generations["us-east-1"],
                )

            def plain_status(index: int, names: list[str] = names) -> object:
                status = {
                    "state": "running",
                    "replicas_ready": 2,
                    "replicas_desired": 2,
                    "last_sync": store.clock.now(),
                }
                return client.update_item(
                    TableName="plain",
                    Key={"endpoint_name": {"S": names[index]}},
                    UpdateExpression="SET #s.#r = :v, #u = :u",
                    ReturnValues="ALL_NEW",
                    ExpressionAttributeNames={"#s": "region_status", "#r": "us-east-1", "#u": "updated_at"},
                    ExpressionAttributeValues={":v": to_attribute(status), ":u": {"S": store.clock.now()}},
                )

            def fenced_state(index: int, names: list[str] = names) -> object:
                record = records[names[index]]
                return store.update_desired_state(
                    record.endpoint_name, "running", expected_lifecycle_id=record.lifecycle_id
                )

            def plain_state(index: int, names: list[str] = names) -> object:
                return client.update_item(
                    TableName="plain",
                    Key={"endpoint_name": {"S": names[index]}},
                    UpdateExpression="SET #d = :d, #u = :u",
                    ReturnValues="ALL_NEW",
                    ExpressionAttributeNames={"#d": "desired_state", "#u": "updated_at"},
                    ExpressionAttributeValues={":d": {"S": "running"}, ":u": {"S": store.clock.now()}},
                )

            # Alternate which side goes first in each round so neither always runs on a warmer server.
            pairs = [
                ("create", fenced_create, plain_put),
                ("status", fenced_status, plain_status),
                ("state", fenced_state, plain_state),
            ]
            for name, fenced, plain in pairs:
                if round_index % 2 == 0 or name == "create":  # the other pairs need the created records
                    results[name].append(timed(fenced, count))
                    results[f"{name}-plain"].append(timed(plain, count))
                else:
                    results[f"{name}-plain"].append(timed(plain, count))
                    results[name].append(timed(fenced, count))

    print(f"store fencing benchmark: {count} endpoints x {options.rounds} rounds, moto_server on loopback")
    print(f"{'operation':<34}{'fenced ops/s':>14}{'plain ops/s':>14}{'cost (plain/fenced)':>22}")
    costs = []
    for name, label in (
        ("create", "create vs put_item"),
        ("status", "update_region_status vs update_item"),
        ("state", "update_desired_state vs update_item"),
    ):
        fenced_rate = statistics.median(results[name])
        plain_rate = statistics.median(results[f"{name}-plain"])
        cost = plain_rate / fenced_rate
        costs.append(cost)
        print(f"{label:<34}{fenced_rate:>14.0f}{plain_rate:>14.0f}{cost:>21.2f}x")
    worst = max(costs)
    verdict = "meets" if worst <= 1.3 else "misses"
    print(f"worst fencing cost: {worst:.2f}x the unfenced write ({verdict} the 1.3x target)")


if __name__ == "__main__":
    main()
