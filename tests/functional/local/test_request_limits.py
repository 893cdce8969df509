"""One request size limit on every way in (`gco.front_door.MAX_REQUEST_BYTES`): the Region's proxy
(nginx's rendered `client_max_body_size`, or the in-process router) and the engine behind it answer
413 above it; a prompt just under it is served, and the fake engine's prefix cache stays bounded."""

from __future__ import annotations

import json

from gco.bench.prefix_blocks import CAPACITY
from gco.endpoints import EndpointStore
from gco.front_door import MAX_REQUEST_BYTES
from gco.local.region.cluster import LocalClusters
from gco.reconcile.proxy.proxy_conf import nginx_conf
from tests.functional.local.conftest import client, eventually
from tests.functional.local.test_engines import SPEC, running
from tests.unit.reconcile.records import EAST


def body_of(size: int) -> bytes:
    """A completion request of exactly `size` bytes."""
    shell = json.dumps({"prompt": "", "max_tokens": 1}).encode()
    return json.dumps({"prompt": "x" * (size - len(shell)), "max_tokens": 1}).encode()


def test_the_rendered_proxy_refuses_bodies_over_the_one_limit() -> None:
    assert f"client_max_body_size {MAX_REQUEST_BYTES};" in nginx_conf()
    assert f"client_body_buffer_size {MAX_REQUEST_BYTES};" in nginx_conf()  # never a temp file


def test_a_body_over_the_limit_is_413_and_one_at_the_limit_is_served(
    store: EndpointStore, clusters: LocalClusters
) -> None:
    store.create("big", SPEC, [EAST])
    eventually(lambda: running(store, "big", EAST, 1), "big running")
    url = f"{clusters.invoke_urls()[EAST]}/big/v1/completions"
    headers = {"content-type": "application/json"}
    with client(clusters) as http:
        refused = http.post(url, content=body_of(MAX_REQUEST_BYTES + 1), headers=headers)
        assert refused.status_code == 413, refused.text
        # the proxy's own answer, in the shape OpenAI clients parse (nginx's error_page, or the router)
        assert refused.json()["error"]["code"] == "request_too_large", refused.text
        unknown = http.post(url.replace("/big/", "/nothing-here/"), json={"prompt": "hi"})
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found", unknown.text
        served = http.post(url, content=body_of(MAX_REQUEST_BYTES), headers=headers)
        assert served.status_code == 200, served.text
        small = http.post(url, json={"prompt": "hi", "max_tokens": 1})
        assert small.status_code == 200, small.text


def test_the_in_process_router_answers_413_over_the_limit(manual: LocalClusters) -> None:
    with client(manual) as http:
        answer = http.post(
            f"{manual.invoke_urls()[EAST]}/col/v1/completions", content=body_of(MAX_REQUEST_BYTES + 1)
        )
    assert answer.status_code == 413
    assert answer.json() == {
        "error": {
            "message": f"the request body is larger than {MAX_REQUEST_BYTES} bytes",
            "type": "invalid_request_error",
            "code": "request_too_large",
        }
    }


def test_the_prefix_cache_capacity_is_below_what_one_request_can_fill() -> None:
    """A request at the limit holds more blocks than the cache keeps: eviction, not growth, bounds it."""
    assert MAX_REQUEST_BYTES // 16 > CAPACITY
