"""The analysis traffic's sender: the port, and its real adapter over HTTP through the Region's way in.

Each request is the framework's streamed completion request (`gco.inference.invoke.stream_request`), pinned to
one version by the proxy's `X-Gco-Version` request header (`gco.reconcile.proxy.proxy_conf`), so both
versions are reached by name through the same proxy and front door the endpoint's users take; the
endpoint's other traffic keeps its weighted split. TTFT is the first streamed event's time, latency
the whole answer's. A request is answered when it is 2xx and the proxy says the pinned version
answered; anything else (an error status, a broken stream, no answer) is a failed request.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Protocol

from gco.endpoints.spec import EndpointSpec
from gco.errors import GcoError
from gco.inference.invoke import send_stream, stream_request
from gco.reconcile.proxy.routes import VERSION_HEADER
from gco.rollout.blocks import Sample, Version

PROMPT = "Count from one to twenty."
TIMEOUT_S = 120.0  # one analysis request: far more than any answer the analysis would call equal


class Traffic(Protocol):
    """Sends one analysis request to one version in one Region."""

    def send(self, region: str, version: Version) -> Sample: ...


class HttpTraffic:
    """`Traffic` over HTTP through each Region's way in (AWS: its signed `InvokeUrl`; local: its proxy).

    Parameters:
        name: the endpoint.
        bases: per Region the base URL endpoints are reached under (`<base>/<name>/...`).
        signed: sign requests with SigV4 (AWS); False on the local stack.
        spec: the endpoint's spec as read (its framework decides the request and how events read).
        timeout: seconds one request may take.
        clock: seconds, for the request's times.
    """

    def __init__(
        self,
        name: str,
        bases: Mapping[str, str],
        *,
        signed: bool,
        spec: EndpointSpec,
        timeout: float = TIMEOUT_S,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.name = name
        self.bases = dict(bases)
        self.signed = signed
        self.path, self.body = stream_request(spec, PROMPT)
        self.framework = spec.framework
        self.timeout = timeout
        self.clock = clock

    def send(self, region: str, version: Version) -> Sample:
        """One pinned request; a failure of any kind is a failed Sample, never an exception."""
        base = self.bases.get(region)
        if not base:
            return Sample(version=version, ok=False)
        url = f"{base.rstrip('/')}/{self.name}{self.path}"
        try:
            result = send_stream(
                region,
                url,
                dict(self.body),
                signed=self.signed,
                on_text=lambda _: None,
                framework=self.framework,
                timeout=self.timeout,
                clock=self.clock,
                headers={VERSION_HEADER: version},
            )
        except GcoError:
            return Sample(version=version, ok=False)
        ok = 200 <= result.status < 300 and result.version == version and result.first_event_ms is not None
        if not ok:
            return Sample(version=version, ok=False, status=result.status, answered_by=result.version)
        return Sample(
            version=version,
            ok=True,
            status=result.status,
            answered_by=result.version,
            ttft_ms=max(result.first_event_ms or 0.0, 1e-3),
            latency_ms=max(result.latency_ms, 1e-3),
        )
