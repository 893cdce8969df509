"""Request paths that could leave the endpoint they name are refused; the rendered proxy refuses them."""

from __future__ import annotations

import re

import pytest

from gco.endpoints.paths import NGINX_REFUSED, NGINX_ROUTE_CHECK, escape_reason, stays_in
from gco.reconcile.proxy.proxy_conf import nginx_conf, proxy_error_body

ESCAPES = [
    "/../../healthz",
    "/v1/completions/../../../ev12/v1/models",
    "/%2e%2e/ev12/v1/models",
    "/%2E%2e/ev12",
    "/.%2e/x",
    "/./v1",
    "/v1/.",
    "/v1/..",
    "/v1%2f..%2fx",
    "/v1%2Fx",
    "/v1%5cx",
    "/v1\\..\\x",
    "/v1%00",
    "/v1\r\nHost: x",
    "/v1 x",
    "/v1\x7f",
    "/é",
    "/" + "a" * 70_000,
]
KEPT = ["/v1/completions", "/", "/v1/models", "/a..b/c", "/.well-known/x", "/v1/%20", "/v1/..a", "/x/%2e%2ex"]


@pytest.mark.parametrize("path", ESCAPES)
def test_an_escaping_path_is_refused_with_its_reason(path: str) -> None:
    reason = escape_reason(path)
    assert reason is not None and "\n" not in reason and len(reason) < 120
    assert not stays_in("/inference/x" + path, "x")


@pytest.mark.parametrize("path", KEPT)
def test_a_path_that_reads_as_it_routes_is_kept(path: str) -> None:
    assert escape_reason(path) is None
    assert stays_in("/inference/x" + path, "x")


def test_only_the_exact_prefix_stays_in_the_endpoint() -> None:
    assert stays_in("/inference/x", "x") and stays_in("/inference/x/v1", "x")
    assert not stays_in("/inference/xy/v1", "x")
    assert not stays_in("/inference/%78/v1", "x")


@pytest.mark.parametrize(
    "path", [p for p in ESCAPES if p.isascii() and p.isprintable() and " " not in p and len(p) < 100]
)
def test_the_nginx_rules_refuse_what_the_program_refuses(path: str) -> None:
    """nginx matches `$request_uri` with PCRE, case-insensitively (`~*`); Python's `re` reads these
    patterns the same way (`\\x5c` is a backslash in both). Spaces and control characters in the
    request line nginx refuses itself (400, since nginx 1.21.1: its CHANGES)."""
    uri = "/inference/x" + path + "?q=1"
    assert any(re.search(rule, uri, re.IGNORECASE) for rule in NGINX_REFUSED), path


@pytest.mark.parametrize("path", KEPT)
def test_the_nginx_rules_keep_what_the_program_keeps(path: str) -> None:
    uri = "/inference/x" + path + "?next=/../y"  # a query is not a path: never refused for it
    assert not any(re.search(rule, uri, re.IGNORECASE) for rule in NGINX_REFUSED), path
    assert re.search(NGINX_ROUTE_CHECK, uri)
    assert not re.search(NGINX_ROUTE_CHECK, uri.replace("/x", "/%78", 1))
    assert not re.search(NGINX_ROUTE_CHECK, uri.replace("/inference/", "/inference//", 1))


def test_the_rendered_proxy_refuses_before_routing_and_checks_the_prefix_as_sent() -> None:
    conf = nginx_conf()
    server = conf[conf.index("server {") :]
    refused = f"return 400 '{proxy_error_body(400).decode()}';"  # in OpenAI's error shape
    for rule in NGINX_REFUSED:
        assert server.index(f'if ($request_uri ~* "{rule}") {{ {refused} }}') < server.index("location =")
    location = server[server.index("location ~ ^/inference/") :]
    check = f'if ($request_uri !~ "^/inference/[a-z0-9-]+(/|\\?|$)") {{ {refused} }}'
    assert location.index(check) < location.index("proxy_pass")
    assert "add_header X-Gco-Version $gco_version always;" in server
