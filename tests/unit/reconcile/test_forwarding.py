"""The proxy's forwarding to another Region, as rendered: only with a global address, once, verified."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from gco.front_door import HOP_HEADER, SERVE_REGION_HEADER
from gco.reconcile.environment import ReconcilerEnvironment
from gco.reconcile.objects import CONFIG_MAP
from gco.reconcile.proxy.proxy_conf import nginx_conf
from gco.reconcile.proxy.proxy_settings import ProxySettings
from gco.reconcile.proxy.render_proxy import NGINX_CONF, render_proxy
from gco.reconcile.proxy_forwarding import CA_BUNDLE, VERIFY_DEPTH, Forwarding

FORWARDING = Forwarding(
    region="us-east-1", regions=("us-east-1", "us-west-2", "eu-west-1"), domain="llm.example.com"
)


def _location(conf: str) -> str:
    start = conf.index("location ~ ^/inference/")
    return conf[start : conf.index("}\n        location / ", start)]


def test_without_a_global_address_nothing_forwards() -> None:
    conf = nginx_conf()
    assert conf == nginx_conf(None)
    for absent in ("$gco_remote", "proxy_ssl", "https://", HOP_HEADER, "x_gco_serve_region"):
        assert absent not in conf
    assert "add_header X-Gco-Version $gco_version always;" in conf


def test_each_other_region_maps_to_its_own_name_only_without_a_hop() -> None:
    conf = nginx_conf(FORWARDING)
    block = conf[conf.index('map "$http_x_gco_hop:$http_x_gco_serve_region" $gco_remote {') :]
    block = block[: block.index("}")]
    entries = re.findall(r'"([^"]*)" (\S+);', block)
    # the other Regions, each keyed with an empty hop header; anything else maps to the default ""
    assert entries == [
        (":us-west-2", "us-west-2.llm.example.com"),
        (":eu-west-1", "eu-west-1.llm.example.com"),
    ]
    assert 'default "";' in block
    assert ":us-east-1" not in block  # this Region is served here
    assert f"proxy_set_header {HOP_HEADER} $gco_hop_out;" in conf
    assert "$http_" + SERVE_REGION_HEADER.lower().replace("-", "_") in conf


def test_the_remote_is_verified_against_the_system_bundle_by_its_name() -> None:
    conf = nginx_conf(FORWARDING)
    for directive in (
        "proxy_ssl_server_name on;",
        "proxy_ssl_verify on;",
        f"proxy_ssl_verify_depth {VERIFY_DEPTH};",
        f"proxy_ssl_trusted_certificate {CA_BUNDLE};",
        "resolver ",  # the remote name is resolved at request time
    ):
        assert directive in conf, directive


def test_forwarding_comes_after_the_path_check_and_before_the_local_404() -> None:
    location = _location(nginx_conf(FORWARDING))
    check, forward = location.index("$request_uri !~"), location.index('if ($gco_remote != "")')
    missing = location.index('if ($gco_primary = "") { return 404; }')
    assert check < forward < missing
    assert "proxy_pass https://$gco_remote;\n                break;" in location  # as sent, no rewrite
    assert "add_header X-Gco-Version $gco_version_out always;" in nginx_conf(FORWARDING)


def test_the_forwarding_settings_travel_in_the_proxy_settings_and_change_the_config_map() -> None:
    settings = ProxySettings(forwarding=FORWARDING)
    env = ReconcilerEnvironment(cluster_name="c", region="us-east-1", proxy=settings).to_env()
    assert ReconcilerEnvironment.from_env(env).proxy.forwarding == FORWARDING
    plain, forwarded = render_proxy(ProxySettings()), render_proxy(settings)
    config = next(obj for obj in forwarded if obj["kind"] == CONFIG_MAP.kind)
    assert config["data"][NGINX_CONF] == nginx_conf(FORWARDING)
    assert render_proxy(settings) == forwarded  # a pure function of the settings
    assert plain[0]["data"] != config["data"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"region": "us-east-1", "regions": ("us-west-2",), "domain": "a.example.com"},
            "is not one of regions",
        ),
        ({"region": "us-east-1", "regions": ("us-east-1", "us-east-1"), "domain": "a.example.com"}, "twice"),
        (
            {"region": "us-east-1", "regions": ("us-east-1",), "domain": "A.example.com"},
            "lower-case DNS name",
        ),
        ({"region": "US", "regions": ("us-east-1",), "domain": "a.example.com"}, "not a Region name"),
        (
            {"region": "us-east-1", "regions": ("us-east-1",), "domain": "a.example.com; evil"},
            "lower-case DNS",
        ),
    ],
)
def test_bad_forwarding_settings_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Forwarding.model_validate(fields)


def test_other_regions_and_names() -> None:
    assert FORWARDING.others == ("us-west-2", "eu-west-1")
    assert FORWARDING.remote_name("us-west-2") == "us-west-2.llm.example.com"
