"""X-Ray tracing of the Lambda handlers, loaded on the first invocation and patching only what gco calls.

Powertools' `Tracer()` built at import time imports the X-Ray SDK and, by default, patches every
library the SDK knows (sqlite3, requests, httplib, the database drivers, ...), importing each
patch module: a large share of a handler's cold import, paid before the first record is read.
`LazyTracer` builds the Tracer when the handler first runs and patches only the two clients the
reconciler uses: botocore (DynamoDB, EKS, with the SDK's own patch) and the Kubernetes API client
(`KubeCluster`, urllib3). The SDK's httplib patch does not see urllib3 2's requests (its
`HTTPConnection.request` no longer calls httplib's `_send_request`, which that patch wraps), so
`trace_kube_requests` wraps the client's one sending method the way that patch wraps httplib
(`xray_recorder.record_subsegment`, namespace `remote`, the host as the name, method, URL and
status as HTTP metadata). Both clients are built on first use too
(`gco.reconcile.runtime.LazyReconciler`), after the patch, so every AWS and Kubernetes call is still
a subsegment of the invocation's trace.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

# The X-Ray SDK patch modules of the libraries the reconciler calls through (aws_xray_sdk.core.patcher).
PATCHED_MODULES = ("botocore",)

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def _powertools_tracer(service: str, modules: Sequence[str]) -> Tracer:
    from aws_lambda_powertools import Tracer

    tracer = Tracer(service=service, auto_patch=True, patch_modules=list(modules))
    if not tracer.disabled:  # as Powertools patches nothing when tracing is off
        trace_kube_requests()
    return tracer


def trace_kube_requests() -> None:
    """Record every request of `KubeCluster` as an X-Ray subsegment (module docstring); once."""
    from urllib.parse import urlsplit

    import wrapt
    from aws_xray_sdk.core import xray_recorder
    from aws_xray_sdk.core.models import http

    from gco.reconcile.kubeapi import KubeCluster

    if getattr(KubeCluster._send, "__wrapped__", None) is not None:
        return

    def describe(
        wrapped: Any,
        instance: Any,
        args: Any,
        kwargs: Any,
        return_value: Any,
        exception: Any,
        subsegment: Any,
        stack: Any,
    ) -> None:
        subsegment.put_http_meta(http.METHOD, args[0])
        server = urlsplit(instance.server)  # `_send` gets the path and query on the server
        subsegment.put_http_meta(
            http.URL, f"{server.scheme}://{server.netloc}{str(args[1]).partition('?')[0]}"
        )
        if return_value is not None:
            subsegment.put_http_meta(http.STATUS, return_value.status_code)

    def traced(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        return xray_recorder.record_subsegment(
            wrapped,
            instance,
            args,
            kwargs,
            name=urlsplit(instance.server).hostname,
            namespace="remote",
            meta_processor=describe,
        )

    wrapt.wrap_function_wrapper(KubeCluster, "_send", traced)


class LazyTracer:
    """A Powertools Tracer built on the first traced invocation, patching only `modules`.

    Parameters:
        service: the service name on every segment.
        modules: the X-Ray SDK patch modules to apply (default: botocore).
        factory: builds the Tracer (the Powertools one; replaced in tests).
    """

    def __init__(
        self,
        service: str,
        *,
        modules: Sequence[str] = PATCHED_MODULES,
        factory: Callable[[str, Sequence[str]], Tracer] = _powertools_tracer,
    ) -> None:
        self.service = service
        self.modules = tuple(modules)
        self._factory = factory
        self._tracer: Tracer | None = None

    @property
    def tracer(self) -> Tracer:
        """The Tracer, built (and the modules patched) on first use."""
        if self._tracer is None:
            self._tracer = self._factory(self.service, self.modules)
        return self._tracer

    def capture_lambda_handler(self, handler: Handler) -> Handler:
        """`Tracer.capture_lambda_handler`, applied when the handler first runs rather than at import."""
        traced: list[Handler] = []

        @functools.wraps(handler)
        def run(event: dict[str, Any], context: Any) -> dict[str, Any]:
            if not traced:
                traced.append(self.tracer.capture_lambda_handler(handler))
            return traced[0](event, context)

        return run
