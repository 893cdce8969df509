"""The global address's health checker: Route 53's consecutive-checks rule, with an injected clock."""

from __future__ import annotations

from gco.local.front.health import FAILURE_THRESHOLD, HealthChecker, HealthState


def test_a_status_flips_only_after_the_threshold_of_disagreeing_checks() -> None:
    state = HealthState()
    assert state.healthy and FAILURE_THRESHOLD == 3
    assert [state.observe(False, t) for t in (1.0, 2.0)] == [False, False] and state.healthy
    assert state.observe(True, 3.0) is False and state.streak == 0  # a good check resets the streak
    assert [state.observe(False, t) for t in (4.0, 5.0, 6.0)] == [False, False, True]
    assert not state.healthy and state.changed_at == 6.0
    assert [state.observe(True, t) for t in (7.0, 8.0, 9.0)] == [False, False, True]
    assert state.healthy and state.changed_at == 9.0 and state.last_checked == 9.0


def test_the_checker_judges_each_region_by_its_own_checks() -> None:
    up = {"us-east-1": True, "us-west-2": True}
    now = iter(range(100))
    checker = HealthChecker(
        {region: f"http://{region}/healthz" for region in up},
        probe=lambda url: up[url.split("/")[2]],
        clock=lambda: float(next(now)),
        threshold=2,
    )
    up["us-east-1"] = False
    checker.check_once()
    assert checker.snapshot() == {"us-east-1": True, "us-west-2": True}
    checker.check_once()
    assert checker.snapshot() == {"us-east-1": False, "us-west-2": True}
    assert checker.states["us-east-1"].changed_at == 2.0
    assert not checker.healthy("eu-west-1")  # a Region it does not check is not healthy
    up["us-east-1"] = True
    checker.check_once()
    checker.check_once()
    assert checker.healthy("us-east-1")
