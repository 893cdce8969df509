"""Settings of each Region's shared inference proxy: one pydantic model, set in `cdk.json` (`gco.proxy`),
carried to the reconciler in one environment variable, and read by the proxy renderers.
"""

# No `from __future__ import annotations` in the modules of pydantic models: pydantic would compile and
# evaluate every string annotation when the models are defined, at each Lambda cold start.

import re
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gco.reconcile.proxy_forwarding import Forwarding

# The IngressClass the routes name: the Region's shared proxy implements it (the Regional stack
# creates the IngressClass object; docs/deploy.md says why the load balancer controller does not).
PROXY_INGRESS_CLASS = "gco-inference-proxy"
PROXY_CONTROLLER = "gco.dev/inference-proxy"
# The reconciler's environment variable holding these settings as JSON (set by the Regional stack).
PROXY_SETTINGS_ENV = "GCO_PROXY_SETTINGS"
DIGEST = re.compile(r"^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$")
MILLICORES = re.compile(r"^[1-9][0-9]*m$")
MEMORY = re.compile(r"^[1-9][0-9]*(Mi|Gi)$")


class ProxySettings(BaseModel):
    """The proxy's images (pinned by digest), size and autoscaling.

    Attributes:
        image: the `api-tls-proxy` container (nginx, unprivileged) that terminates TLS and routes.
        tls_init_image: the init container that writes the pod's serving key and certificate.
        cpu_request: `api-tls-proxy`'s CPU request, in millicores (`250m`); its HPA scales on it.
        memory_request: `api-tls-proxy`'s memory request (and limit).
        cpu_target: the HPA's target utilization of that CPU request (1-100).
        min_replicas, max_replicas: the HPA's bounds.
        forwarding: this Region and the deployment's global domain, where the deployment has a global
            address (set by the Regional stack from `global_address`, never in cdk.json); None: the
            proxy serves every request itself (`gco.reconcile.proxy_forwarding`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str = (
        "docker.io/nginxinc/nginx-unprivileged:1.27-alpine"
        "@sha256:65e3e85dbaed8ba248841d9d58a899b6197106c23cb0ff1a132b7bfe0547e4c0"
    )
    tls_init_image: str = (
        "docker.io/alpine/openssl@sha256:f6def4887e8413b228b66f314d0bcf5c25b128d918a258f3b0b9d66a0327edcb"
    )
    cpu_request: str = "250m"
    memory_request: str = "256Mi"
    cpu_target: int = Field(default=70, ge=1, le=100)
    min_replicas: int = Field(default=2, ge=1, le=100)
    max_replicas: int = Field(default=10, ge=1, le=100)
    forwarding: Forwarding | None = None

    @field_validator("image", "tls_init_image")
    @classmethod
    def _pinned(cls, value: str) -> str:
        if not DIGEST.match(value):
            raise ValueError(f"{value!r} is not pinned by digest (<image>@sha256:<64 lowercase hex>)")
        return value

    @field_validator("cpu_request")
    @classmethod
    def _millicores(cls, value: str) -> str:
        if not MILLICORES.match(value):
            raise ValueError(f"{value!r} is not a positive millicore quantity such as 250m")
        return value

    @field_validator("memory_request")
    @classmethod
    def _memory(cls, value: str) -> str:
        if not MEMORY.match(value):
            raise ValueError(f"{value!r} is not a memory quantity such as 256Mi")
        return value

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        if self.min_replicas > self.max_replicas:
            raise ValueError("needs min_replicas <= max_replicas")
        return self


DEFAULT_PROXY = ProxySettings()
