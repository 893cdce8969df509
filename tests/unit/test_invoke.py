"""The invoke request: framework defaults, --body parsing, local bases, SigV4 for execute-api."""

from __future__ import annotations

import pytest

from gco.endpoints.spec import parse_spec
from gco.errors import GcoInputError
from gco.invoke import default_request, local_bases, parse_body, sigv4_headers

IMAGE = "vllm/vllm-openai:v0.6.3"


def test_framework_defaults() -> None:
    path, body = default_request(parse_spec({"image": IMAGE, "model_id": "m"}), "hi")
    assert path == "/v1/completions"
    assert body == {"model": "m", "prompt": "hi", "max_tokens": 32, "temperature": 0, "stream": False}
    path, body = default_request(parse_spec({"image": IMAGE, "framework": "tgi", "port": 8080}), "hi")
    assert path == "/generate"
    assert body == {"inputs": "hi", "parameters": {"do_sample": False, "max_new_tokens": 32}}


@pytest.mark.parametrize("text", ["{", "[1]", '"x"', "nan-ish"])
def test_body_must_be_a_json_object(text: str) -> None:
    with pytest.raises(GcoInputError, match=r"^--body: "):
        parse_body(text)


def test_local_bases() -> None:
    assert local_bases({}) == {}
    assert local_bases({"GCO_INVOKE_URLS": '{"us-east-1": "http://127.0.0.1:1/inference"}'}) == {
        "us-east-1": "http://127.0.0.1:1/inference"
    }
    with pytest.raises(GcoInputError, match="GCO_INVOKE_URLS"):
        local_bases({"GCO_INVOKE_URLS": '["x"]'})


def test_sigv4_signs_for_execute_api_in_the_region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "token")
    url = "https://abc.execute-api.us-west-2.amazonaws.com/prod/smol/v1/completions"
    headers = sigv4_headers("POST", url, b"{}", "us-west-2")
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/us-west-2/execute-api/aws4_request" in headers["Authorization"]
    assert headers["X-Amz-Security-Token"] == "token"
    assert "X-Amz-Date" in headers
