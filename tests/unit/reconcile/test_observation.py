"""One observation per pass, gathered until the plan asks for nothing more; a plan asks for one reading."""

from __future__ import annotations

from typing import Any

import pytest

from gco.reconcile import observation
from gco.reconcile.batches import run_each
from gco.reconcile.observation import Observation, plan_of
from gco.reconcile.planner import Plan, RouteCheck
from gco.reconcile.proxy.routes import Route, route_of
from gco.reconcile.render import render
from gco.reconcile.settings import DEFAULT_SETTINGS
from tests.unit.reconcile.records import EAST, make_record
from tests.unit.reconcile.test_planner import stored

ROUTE = Route(endpoint="llama", path="/inference/llama", upstream="http://llama.gco-inference.svc:8000")


def test_a_plan_asks_for_the_pods_or_the_route_never_both() -> None:
    with pytest.raises(ValueError, match="never both"):
        Plan(needs_pods=True, needs_route=ROUTE)


def test_a_plan_that_asks_acts_on_nothing() -> None:
    with pytest.raises(ValueError, match="acts on nothing"):
        Plan(apply=({"kind": "Service"},), needs_pods=True)


def test_the_gathered_observation_gets_the_plan_what_it_asked_for() -> None:
    record = make_record()
    starting = Observation(record, tuple(stored(render(record, EAST), ready=False)))
    asks = plan_of("llama", starting, EAST, DEFAULT_SETTINGS)
    assert asks.needs_pods and asks.needs_route is None
    decided = plan_of("llama", starting.with_pods([]), EAST, DEFAULT_SETTINGS)
    assert not decided.needs_pods and decided.status is not None and decided.status.state == "creating"

    ready = Observation(record, tuple(stored(render(record, EAST))))
    asks = plan_of("llama", ready, EAST, DEFAULT_SETTINGS)
    assert asks.needs_route == route_of(next(o for o in render(record, EAST) if o["kind"] == "Ingress"))
    decided = plan_of("llama", ready.with_route(RouteCheck()), EAST, DEFAULT_SETTINGS)
    assert decided.needs_route is None and decided.status is not None and decided.status.state == "running"


def test_a_plan_that_asks_again_for_what_it_was_given_is_a_planner_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stand-in planner that always asks for the Pods: the gather loop would never end."""

    def asks_for_pods(*args: Any, **kwargs: Any) -> Plan:
        return Plan(converged=False, reason="reading Pods", needs_pods=True)

    monkeypatch.setattr(observation, "plan", asks_for_pods)
    seen = Observation(make_record(), ()).with_pods([])
    with pytest.raises(RuntimeError, match="asks again"):
        plan_of("llama", seen, EAST, DEFAULT_SETTINGS)


def test_the_answers_to_applies_are_the_next_observation_and_drop_what_was_read_of_the_old() -> None:
    record = make_record()
    objects = stored(render(record, EAST))
    seen = Observation(record, tuple(objects)).with_pods([{"kind": "Pod"}]).with_route(RouteCheck())
    answer = {**objects[0], "metadata": {**objects[0]["metadata"], "resourceVersion": "9"}}
    after = seen.after_applies([answer])
    assert after.record is record
    assert len(after.objects) == len(objects) and answer in after.objects and objects[0] not in after.objects
    assert after.pods is None and after.route is None


def test_each_endpoint_of_a_batch_has_its_own_result_or_error() -> None:
    def work(name: str) -> str:
        if name == "bad":
            raise RuntimeError("failed")
        return name.upper()

    for concurrency in (1, 3):
        futures = run_each(["a", "bad", "c"], work, concurrency)
        assert [futures[name].exception() is not None for name in ("a", "bad", "c")] == [False, True, False]
        assert futures["a"].result() == "A" and futures["c"].result() == "C"


def test_plans_on_one_reading_render_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first plan on a reading renders; the plans after it on the same record and secrets (with
    the Pods, with the proxy's answer, on the API server's answers to the applies) reuse what it
    rendered, and decide as if they had rendered again."""
    from gco.reconcile import planner

    renders: list[str] = []

    def counted(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        renders.append(args[0].endpoint_name)
        return render(*args, **kwargs)

    monkeypatch.setattr(planner, "render", counted)
    record = make_record()
    fresh = Observation(record, ())
    applying = plan_of("llama", fresh, EAST, DEFAULT_SETTINGS)
    assert applying.apply and renders == ["llama"]
    answered = fresh.rendered_by(applying).after_applies(stored(render(record, EAST), ready=False))
    asks = plan_of("llama", answered, EAST, DEFAULT_SETTINGS)
    decided = plan_of("llama", answered.rendered_by(asks).with_pods([]), EAST, DEFAULT_SETTINGS)
    assert asks.needs_pods and decided.status is not None and decided.status.state == "creating"
    ready = answered.after_applies(stored(render(record, EAST)))
    asks = plan_of("llama", ready, EAST, DEFAULT_SETTINGS)
    running = plan_of("llama", ready.with_route(RouteCheck()), EAST, DEFAULT_SETTINGS)
    assert asks.needs_route is not None and running.status is not None and running.status.state == "running"
    assert renders == ["llama"]  # one render for the reading, however many plans
    assert plan_of("llama", Observation(record, ()), EAST, DEFAULT_SETTINGS).desired == applying.desired
    assert renders == ["llama", "llama"]  # a fresh reading renders again
