"""The handlers' tracer: built on the first invocation, patching only the clients gco uses."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gco.reconcile.kubeapi import KubeCluster
from gco.reconcile.tracing import PATCHED_MODULES, LazyTracer


class RecordingTracer:
    """Stands in for Powertools' Tracer: records what it was asked to wrap (sends no segment)."""

    def __init__(self, service: str, modules: Sequence[str]) -> None:
        self.service, self.modules, self.wrapped = service, tuple(modules), 0

    def capture_lambda_handler(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        self.wrapped += 1

        def traced(event: dict[str, Any], context: Any) -> dict[str, Any]:
            return {"traced": handler(event, context)}

        return traced


def reset_powertools_tracers() -> None:
    """Powertools keeps every Tracer's configuration in class state: reset it around a test."""
    from aws_lambda_powertools import Tracer

    Tracer._reset_config()  # type: ignore[no-untyped-call]  # aws-lambda-powertools leaves it untyped


def test_tracer_is_built_on_the_first_invocation_once() -> None:
    built: list[RecordingTracer] = []

    def factory(service: str, modules: Sequence[str]) -> Any:
        built.append(RecordingTracer(service, modules))
        return built[-1]

    tracer = LazyTracer("gco-test", factory=factory)

    @tracer.capture_lambda_handler
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        """The handler's own docstring."""
        return {"n": event["n"]}

    assert built == [] and handler.__name__ == "handler" and handler.__doc__ == "The handler's own docstring."
    assert handler({"n": 1}, None) == {"traced": {"n": 1}}
    assert handler({"n": 2}, None) == {"traced": {"n": 2}}
    assert len(built) == 1 and built[0].wrapped == 1
    assert (built[0].service, built[0].modules) == ("gco-test", PATCHED_MODULES)
    built_tracer: object = tracer.tracer  # a RecordingTracer, though the factory's type says Tracer
    assert built_tracer is built[0]


def test_the_powertools_tracer_patches_only_the_named_modules(monkeypatch: Any) -> None:
    """Outside Lambda Powertools disables tracing; the configuration is still the one given."""
    monkeypatch.delenv("LAMBDA_TASK_ROOT", raising=False)
    reset_powertools_tracers()
    try:
        tracer = LazyTracer("gco-test").tracer
        assert tracer._config["patch_modules"] == ["botocore"]
        assert tracer.disabled and tracer.auto_patch
        assert getattr(KubeCluster._send, "__wrapped__", None) is None, "nothing patched while tracing is off"
    finally:
        reset_powertools_tracers()
