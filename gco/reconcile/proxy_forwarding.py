"""Forwarding to another Region: what the proxy of one Region knows of the deployment's global address.

With a global address (`docs/global.md`), each Region's global API runs an authorizer that names the
Region to serve a request in the header `X-Gco-Serve-Region`. The proxy serves a request itself when
that is its own Region (or the header is absent or names no Region of the deployment), and otherwise
forwards it once to `https://<serving Region>.<domain>`, the other Region's own custom domain, with
`X-Gco-Hop: 1` and the caller's `Authorization`; a request that carries `X-Gco-Hop` is never
forwarded again. Pure: `nginx_conf` renders these settings; the Regional stack writes them into the
proxy's settings (`ProxySettings.forwarding`).
"""

# No `from __future__ import annotations` in the modules of pydantic models (see gco/endpoints/record.py).

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
# The system CA bundle of the proxy's image (Alpine's and Debian's ca-certificates install it here):
# nginx verifies the other Region's API Gateway certificate (ACM, a public CA) against it.
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# ACM's chain is the leaf, an intermediate and Amazon's root (cross-signed): nginx's default depth
# of 1 would refuse it (https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_ssl_verify_depth).
VERIFY_DEPTH = 4


class Forwarding(BaseModel):
    """This Region and the deployment's other Regions under one global domain.

    Attributes:
        region: the Region this proxy runs in (requests for it are served here).
        regions: every Region of the deployment (the only values of the header that forward).
        domain: the global domain; Region `r` answers at `<r>.<domain>`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    region: str
    regions: tuple[str, ...] = Field(min_length=1)
    domain: str

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if not REGION.match(value):
            raise ValueError(f"{value!r} is not a Region name")
        return value

    @field_validator("regions")
    @classmethod
    def _regions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not REGION.match(item):
                raise ValueError(f"{item!r} is not a Region name")
        if len(set(value)) != len(value):
            raise ValueError("lists a Region twice")
        return value

    @field_validator("domain")
    @classmethod
    def _domain(cls, value: str) -> str:
        if not DOMAIN.match(value):
            raise ValueError(f"{value!r} is not a lower-case DNS name")
        return value

    @model_validator(mode="after")
    def _own_region_listed(self) -> "Forwarding":
        if self.region not in self.regions:
            raise ValueError(f"region {self.region!r} is not one of regions")
        return self

    def remote_name(self, region: str) -> str:
        """The name another Region answers forwarded requests at: `<region>.<domain>`."""
        return f"{region}.{self.domain}"

    @property
    def others(self) -> tuple[str, ...]:
        """The Regions a request may be forwarded to (every one but this)."""
        return tuple(region for region in self.regions if region != self.region)
