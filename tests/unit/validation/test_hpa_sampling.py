"""The HPA check's logic on an injected clock: consecutive samples, a streak broken, the timeout."""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from gco.endpoints.store import EndpointStore
from gco.reconcile.objects import DEPLOYMENT, ENDPOINT_LABEL, HPA, LIFECYCLE_ANNOTATION, Kind
from gco.validation import parse_settings
from gco.validation.ports import ClusterReader, EndpointHttp
from gco.validation.run import Matrix, new_checkpoint
from tests.unit.validation.sample import settings


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class ScriptedReader:
    """Answers each endpoint's list with the next (current, ready) pair of its script (the last repeats)."""

    def __init__(self, scripts: Mapping[str, list[tuple[int, int]]], lifecycles: Mapping[str, str]) -> None:
        self.scripts = {name: list(script) for name, script in scripts.items()}
        self.lifecycles = lifecycles

    def list(self, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        name = labels[ENDPOINT_LABEL]
        script = self.scripts[name]
        current, ready = script.pop(0) if len(script) > 1 else script[0]
        meta = {"name": name, "annotations": {LIFECYCLE_ANNOTATION: self.lifecycles[name]}}
        return [
            {
                "apiVersion": HPA.api_version,
                "kind": HPA.kind,
                "metadata": meta,
                "status": {"currentReplicas": current},
            },
            {
                "apiVersion": DEPLOYMENT.api_version,
                "kind": DEPLOYMENT.kind,
                "metadata": meta,
                "status": {"readyReplicas": ready},
            },
        ]

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    # `builtins.list`: inside this class `list` names the method above.
    def list_any(self, key: str, values: Sequence[str]) -> builtins.list[dict[str, Any]]:
        return []


class OneRegion:
    def __init__(self, reader: ScriptedReader) -> None:
        self._reader = reader

    def regions(self) -> list[str]:
        return ["us-east-1"]

    def reader(self, region: str) -> ClusterReader:
        return self._reader


def sample(
    tmp_path: Path, scripts: dict[str, list[tuple[int, int]]], **changes: Any
) -> tuple[Matrix, Clock, bool]:
    parsed = parse_settings(settings(**changes))
    checkpoint = new_checkpoint(parsed, tmp_path / "settings.json", "h1")
    lifecycles = {entry.name: f"{index:064x}" for index, entry in enumerate(checkpoint.endpoints)}
    checkpoint = checkpoint.model_copy(
        update={
            "endpoints": [
                e.model_copy(update={"lifecycle_id": lifecycles[e.name]}) for e in checkpoint.endpoints
            ]
        }
    )
    clock = Clock()
    matrix = Matrix(
        settings=parsed,
        store=cast(EndpointStore, None),  # the HPA check reads only the cluster
        clusters=OneRegion(ScriptedReader(scripts, lifecycles)),
        http=cast(EndpointHttp, None),
        run_dir=tmp_path,
        clock=clock,
        sleep=clock.sleep,
        progress=lambda line: None,
    )
    matrix.state, matrix.region = checkpoint, parsed.selected_region
    return matrix, clock, matrix._hpa()


def test_two_consecutive_samples_pass_and_a_broken_streak_starts_again(tmp_path: Path) -> None:
    scripts = {"mx-h1-vllm-hpa": [(2, 2), (2, 1), (2, 2), (2, 2)], "mx-h1-tgi-hpa": [(1, 1), (2, 2), (2, 2)]}
    matrix, clock, passed = sample(tmp_path, scripts, monitor_interval_seconds=5)
    assert passed
    assert clock.sleeps == [5, 5, 5]  # four samples, one per monitor interval
    samples = {s.endpoint: s.data["samples"] for s in matrix.state.steps}
    assert samples == {
        "mx-h1-vllm-hpa": [[2, 2], [2, 1], [2, 2], [2, 2]],
        "mx-h1-tgi-hpa": [[1, 1], [2, 2], [2, 2]],
    }
    assert [s.verdict for s in matrix.state.steps] == ["pass", "pass"]


def test_an_hpa_that_never_holds_two_fails_at_the_timeout(tmp_path: Path) -> None:
    scripts = {"mx-h1-vllm-hpa": [(2, 2)], "mx-h1-tgi-hpa": [(1, 1)]}
    matrix, clock, passed = sample(tmp_path, scripts, hpa_timeout_seconds=3, hpa_stability_intervals=3)
    assert not passed and clock.now == 3
    verdicts = {s.endpoint: (s.verdict, s.detail) for s in matrix.state.steps}
    assert verdicts["mx-h1-vllm-hpa"][0] == "pass"
    assert verdicts["mx-h1-tgi-hpa"] == (
        "fail",
        "current 1, ready 1 (want 2 for 3 consecutive samples) after 3 s",
    )
