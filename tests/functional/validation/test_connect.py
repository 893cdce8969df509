"""The matrix's real adapters: which clusters the environment names, and requests through the
Region's way in (SigV4-signed to the Regional stack's InvokeUrl in AWS), over loopback HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from gco.env import CLUSTER_URLS_ENV
from gco.inference.invoke import INVOKE_URLS_ENV
from gco.validation.connect import EksClusters, ProxyHttp, UrlClusters, environment_clusters
from gco.validation.errors import UnreachableError
from tests.functional.loopback import serving


class Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str, dict[str, str], bytes]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        Recorder.seen.append((self.command, self.path, dict(self.headers.items()), body))
        payload = b'{"ok": true}' if self.path.endswith("/json") else b"plain text"
        self.send_response(200)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()


@pytest.fixture
def server() -> Iterator[str]:
    Recorder.seen = []
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Recorder)) as url:
        yield url


class CloudFormation:
    """Stands in for CloudFormation's DescribeStacks of the Regional stack (its InvokeUrl output)."""

    def __init__(self, url: str | None) -> None:
        self.url = url

    def describe_stacks(self, StackName: str) -> dict[str, Any]:  # noqa: N803 - boto3's keyword
        from botocore.exceptions import ClientError

        if self.url is None:
            raise ClientError({"Error": {"Code": "ValidationError", "Message": "no stack"}}, "DescribeStacks")
        return {"Stacks": [{"Outputs": [{"OutputKey": "InvokeUrl", "OutputValue": self.url}]}]}


def test_the_environment_names_the_clusters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CLUSTER_URLS_ENV, json.dumps({"us-east-1": "http://127.0.0.1:1"}))
    local = environment_clusters("us-east-1")
    assert isinstance(local, UrlClusters) and local.regions() == ["us-east-1"]
    with pytest.raises(UnreachableError, match="no cluster is known for eu-west-1"):
        local.reader("eu-west-1")
    monkeypatch.setenv(CLUSTER_URLS_ENV, "[1]")
    with pytest.raises(UnreachableError, match="GCO_CLUSTER_URLS is not a JSON object"):
        environment_clusters("us-east-1")
    monkeypatch.delenv(CLUSTER_URLS_ENV)
    eks = environment_clusters("eu-west-1")
    assert isinstance(eks, EksClusters) and eks.regions() == ["eu-west-1"]


def test_requests_in_aws_go_signed_to_the_invoke_url(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(INVOKE_URLS_ENV, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    http = ProxyHttp(timeout=5, cloudformation=lambda region: CloudFormation(f"{server}/prod/"))
    answer = http.post("us-east-1", "mx-a-vllm-hpa", "/json", {"prompt": "hi"})
    assert (answer.status, answer.body) == (200, {"ok": True})
    assert answer.url == f"{server}/prod/mx-a-vllm-hpa/json"
    method, path, headers, body = Recorder.seen[-1]
    assert (method, path, json.loads(body)) == ("POST", "/prod/mx-a-vllm-hpa/json", {"prompt": "hi"})
    assert (
        "Credential=AKIDEXAMPLE/" in headers["Authorization"] and "/execute-api/" in headers["Authorization"]
    )
    text = http.get("us-east-1", "mx-a-vllm-hpa", "/health")
    assert (text.status, text.body) == (200, "plain text")
    with pytest.raises(UnreachableError, match="no invoke URL is known for eu-west-1"):
        ProxyHttp(timeout=5, cloudformation=lambda region: CloudFormation(None)).get("eu-west-1", "x", "/")


def test_a_request_that_gets_no_answer_is_status_zero() -> None:
    http = ProxyHttp(timeout=1, bases={"us-east-1": "http://127.0.0.1:9/inference"})
    answer = http.get("us-east-1", "x", "/health")
    assert answer.status == 0 and "ConnectError" in str(answer.body)
