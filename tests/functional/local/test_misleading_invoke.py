"""`gco inference invoke` where its answer used to mislead (issue 35, "Misleading"): a Region it
does not know is bad input (2), a query string is passed on as in AWS, the proxy's path rule is the
CLI's, and an HTML page from a wrong URL is summarised, not printed whole."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gco.endpoints import EndpointStore
from gco.endpoints.paths import MAX_PATH
from gco.inference.invoke import INVOKE_URLS_ENV
from gco.local.region.cluster import LocalClusters
from tests.functional.cli.test_inference_cli import Cli
from tests.functional.local.conftest import eventually, unstamped_items
from tests.functional.local.test_engines import MODEL, SPEC, running
from tests.functional.local.test_isolation import raw_status
from tests.functional.local.test_traffic_cli import cli, local_cli
from tests.unit.reconcile.records import EAST

__all__ = ["cli", "local_cli"]  # fixtures, imported to be used here

PAGE = (
    "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body>" + "x" * 5000 + "</body></html>"
)


@pytest.fixture
def html_server() -> Iterator[str]:
    """A web server that is not gco's proxy: every request gets a 404 HTML page."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            data = PAGE.encode()
            self.send_response(404)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/inference"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def serving(store: EndpointStore) -> None:
    store.create("smol", SPEC, [EAST])
    eventually(lambda: running(store, "smol", EAST, 1), "smol running")


def test_invoke_region_bogus_exits_2(store: EndpointStore, local_cli: Cli) -> None:
    serving(store)
    before = unstamped_items(store)
    _, err = local_cli("inference", "invoke", "smol", "--region", "bogus", code=2)
    assert err == "error: --region: 'bogus' is not an AWS Region name (for example us-east-1)\n"
    _, err = local_cli("inference", "invoke", "smol", "--region", "eu-west-1", code=2)
    assert err == f"error: --region: endpoint 'smol' does not target eu-west-1 (its Regions: {EAST})\n"
    assert unstamped_items(store) == before


def test_invoke_path_with_a_query_string_works_locally_as_in_aws(
    store: EndpointStore, local_cli: Cli
) -> None:
    serving(store)
    answer = local_cli.json("inference", "invoke", "smol", "--path", "/v1/models?limit=1", "--body", "{}")
    assert answer["status"] == 200 and answer["body"]["data"][0]["id"] == MODEL
    assert answer["url"].endswith("/smol/v1/models?limit=1")


def test_the_cli_refuses_the_paths_the_proxy_refuses(
    store: EndpointStore, local_cli: Cli, clusters: LocalClusters
) -> None:
    """A path that fits 8,192 characters alone but not with the endpoint's prefix: the proxy refuses
    the target it sees, so the CLI, checking the same target by the same rule, refuses it too."""
    serving(store)
    path = "/" + "a" * (MAX_PATH - 1)
    _, err = local_cli("inference", "invoke", "smol", "--path", path, "--body", "{}", code=2)
    assert f"is longer than {MAX_PATH} characters ({MAX_PATH + len('/inference/smol')})" in err
    assert err.count("\n") == 1
    assert raw_status(clusters, "/smol" + path) in (400, 414)  # the proxy refuses it (nginx: 414)
    assert raw_status(clusters, "/smol/v1/models?limit=1") == 200
    _, err = local_cli("inference", "invoke", "smol", "--path", "/v1/models?a=\x01", "--body", "{}", code=2)
    assert "in its query" in err


def test_an_html_error_page_from_a_wrong_url_is_summarised(
    store: EndpointStore, local_cli: Cli, html_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    serving(store)
    monkeypatch.setenv(INVOKE_URLS_ENV, json.dumps({EAST: html_server}))
    out, err = local_cli("inference", "invoke", "smol", "--prompt", "hi", code=1)
    lines = out.splitlines()
    assert lines[0].startswith(f"{EAST} 404 ") and len(lines) == 3, out
    assert lines[2] == (
        f"an HTML page: '404 Not Found', {len(PAGE)} characters: "
        "not an answer of gco's proxy (is the URL right?)"
    )
    assert err == f"error: smol in {EAST} answered 404\n"
