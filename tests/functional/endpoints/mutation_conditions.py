"""Weaken the store's conditions one clause at a time and see which tests notice.

`make mutation-conditions` runs this module. For every clause label of `gco/endpoints/
conditions.py` (and a few groups of clauses that guard each other), it drops the clause from
every ConditionExpression the store sends, runs the stateful machine of `fencing_machine` on a
real moto server, and records whether it failed (killed) or not (survived). Survivors of the
machine are then run against the store's example tests (`test_store.py`, `test_fencing.py`)
with the same clause dropped (env `GCO_DROP_CLAUSES`, read by tests/conftest.py).

`GCO_MUTATION_ONLY=review` runs the 27 review variants and the groups;
`GCO_MUTATION_ONLY=status.member,ack.deleted+ack.lifecycle` runs just those (while iterating on
the machine). It prints one line per variant and exits 1 when the machine alone kills fewer than
`REQUIRED_REVIEW_KILLS` of the 27 review variants, or when a survivor of both is not listed in
docs/fencing.md as equivalent.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gco import aws
from gco.endpoints import EndpointStore, init_table
from gco.endpoints.expressions import Expression
from gco.local.moto.motoserver import MotoServer

REVIEW = (
    "desired.lifecycle",
    "desired.expected_state",
    "desired.label",
    "desired.not_deleted",
    "desired.fenced_record",
    "start.stopped",
    "start.lifecycle",
    "live.lifecycle",
    "live.not_deleted",
    "live.snapshot",
    "scale.lifecycle",
    "scale.live",
    "scale.no_mooncake",
    "scale.not_autoscaled",
    "status.lifecycle",
    "status.region_generation",
    "status.not_deleted",
    "status.member",
    "ack.deleted",
    "ack.generation",
    "ack.member",
    "ack.once",
    "purge.deleted",
    "purge.generation",
    "purge.regions",
    "purge.acknowledged",
    "purge.lifecycle",
)
OTHERS = (
    "create.absent",
    "backfill.exists",
    "backfill.legacy",
    "backfill.snapshot",
    "desired.exists",
    "start.exists",
    "live.exists",
    "scale.exists",
    "status.exists",
    "ack.lifecycle",
    "purge.snapshot",
    "clock.advances",
    "spec.stopped",
    "spec.not_stopped",
)
CATALOGUE = REVIEW + OTHERS
# Clauses that guard the same fact: dropped together, something must notice.
GROUPS = (
    ("purge.generation", "purge.regions", "purge.acknowledged", "purge.lifecycle"),
    ("ack.deleted", "ack.lifecycle"),
    ("ack.generation", "ack.lifecycle"),
)
REQUIRED_REVIEW_KILLS = 20
# As many steps as the stateful test runs in `make test` (its MIN_STEPS): the harness measures that test.
STEPS = int(os.environ.get("GCO_MUTATION_STEPS", "2000"))
DROP_ENV = "GCO_DROP_CLAUSES"
ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_TESTS = ("tests/functional/endpoints/test_store.py", "tests/functional/endpoints/test_fencing.py")


@contextmanager
def dropped(labels: frozenset[str]) -> Iterator[None]:
    """Leave the clauses with these labels out of every expression built meanwhile."""
    original = Expression.require

    def require(self: Expression, label: str, condition: str) -> None:
        if label not in labels:
            original(self, label, condition)

    Expression.require = require  # type: ignore[method-assign]
    try:
        yield
    finally:
        Expression.require = original  # type: ignore[method-assign]


def machine_kills(store: EndpointStore, labels: frozenset[str]) -> str | None:
    """The machine's failure with `labels` dropped (its first line), or None when it passed."""
    from tests.functional.endpoints.test_store_concurrency import run_machine

    try:
        with dropped(labels):
            run_machine(store, STEPS, shrink=False)
    except Exception as failure:
        return (str(failure).splitlines() or [type(failure).__name__])[0][:100]
    return None


def examples_kill(labels: frozenset[str]) -> bool:
    env = {**os.environ, DROP_ENV: ",".join(sorted(labels))}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *EXAMPLE_TESTS]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=900, check=False)
    return result.returncode != 0


def documented_equivalent(label: str) -> bool:
    """Whether docs/fencing.md's table of clauses calls `label` (or a `+`-joined group) equivalent."""
    text = (ROOT / "docs" / "fencing.md").read_text(encoding="utf-8")
    return any(line.startswith(f"| `{label}`") and "equivalent" in line for line in text.splitlines())


def chosen_variants(only: str) -> list[frozenset[str]]:
    """The variants to run: every one, "review" (the 27 and the groups), or a comma-separated
    list of labels and `+`-joined groups (`status.member,ack.deleted+ack.lifecycle`)."""
    if only not in ("", "review"):
        variants = [frozenset(name.split("+")) for name in only.split(",") if name]
        unknown = sorted({label for labels in variants for label in labels} - set(CATALOGUE))
        if unknown:
            raise SystemExit(f"GCO_MUTATION_ONLY: unknown clause labels {unknown}")
        return variants
    labels_wanted = REVIEW if only == "review" else CATALOGUE
    return [frozenset({label}) for label in labels_wanted] + [frozenset(group) for group in GROUPS]


def main() -> int:
    only = os.environ.get("GCO_MUTATION_ONLY", "")
    variants = chosen_variants(only)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("DYNAMODB_REGION", "us-east-1")
    review_kills = 0
    unexplained: list[str] = []
    with MotoServer() as server:
        client = aws.client("dynamodb", endpoint_url=server.url)
        init_table(client, "gco-mutation")
        store = EndpointStore(client, "gco-mutation")
        baseline = machine_kills(store, frozenset())
        if baseline is not None:
            print(f"FAIL: the machine fails with every clause in place: {baseline}")
            return 1
        print(f"baseline  all clauses in place: the machine passes {STEPS} steps", flush=True)
        for labels in variants:
            name = "+".join(sorted(labels))
            started = time.monotonic()
            reason = machine_kills(store, labels)
            seconds = time.monotonic() - started
            if reason is not None:
                review_kills += len(labels) == 1 and name in REVIEW
                print(f"killed    {name:<40} machine {seconds:5.0f}s  {reason}", flush=True)
                continue
            if examples_kill(labels):
                print(f"killed    {name:<40} examples (machine survived {seconds:.0f}s)", flush=True)
                continue
            equivalent = documented_equivalent(name)
            print(f"survived  {name:<40} {'equivalent (docs/fencing.md)' if equivalent else 'UNEXPLAINED'}")
            if not equivalent:
                unexplained.append(name)
    print(f"the stateful machine alone killed {review_kills} of the {len(REVIEW)} review variants")
    if only not in ("", "review"):  # a chosen few: only their survivors can fail the run
        review_kills = REQUIRED_REVIEW_KILLS
    if review_kills < REQUIRED_REVIEW_KILLS or unexplained:
        print(f"FAIL: need {REQUIRED_REVIEW_KILLS}; unexplained survivors: {unexplained or 'none'}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
