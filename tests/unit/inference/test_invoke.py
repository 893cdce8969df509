"""The invoke request: framework defaults, --body parsing, local bases, SigV4 for execute-api."""

from __future__ import annotations

import pytest

from gco.endpoints.spec import parse_spec
from gco.errors import GcoInputError
from gco.inference.invoke import (
    InvokeFailedError,
    default_request,
    event_text,
    local_bases,
    parse_body,
    sigv4_headers,
    sse_data,
    stream_request,
)

IMAGE = "vllm/vllm-openai:v0.6.3"


def test_framework_defaults() -> None:
    """Every built-in framework is asked a chat completion (the model's chat template frames the
    prompt as the user's turn: an instruct model needs it to answer at all)."""
    chat = {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 32,
        "temperature": 0,
        "stream": False,
    }
    path, body = default_request(parse_spec({"image": IMAGE, "model_id": "m"}), "hi")
    assert (path, body) == ("/v1/chat/completions", {"model": "m", **chat})
    path, body = default_request(parse_spec({"image": IMAGE, "framework": "tgi", "port": 8080}), "hi")
    assert (path, body) == ("/v1/chat/completions", {"model": "tgi", **chat})
    path, body = stream_request(parse_spec({"image": IMAGE, "framework": "sglang", "model_id": "m"}), "hi")
    assert (path, body) == ("/v1/chat/completions", {"model": "m", **chat, "stream": True})


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


def test_streamed_requests() -> None:
    """Every built-in framework: the same chat completion with `stream: true`, its chunks read as
    OpenAI's (`delta.content`) whatever the framework; TGI's own stream events are still read."""
    path, body = stream_request(parse_spec({"image": IMAGE, "model_id": "m"}), "hi")
    assert (path, body["stream"], body["messages"]) == (
        "/v1/chat/completions",
        True,
        [{"role": "user", "content": "hi"}],
    )
    path, body = stream_request(parse_spec({"image": IMAGE, "framework": "tgi", "port": 8080}), "hi")
    assert (path, body["stream"]) == ("/v1/chat/completions", True)
    chunk = '{"choices": [{"index": 0, "delta": {"content": " there"}}]}'
    assert event_text(chunk, "tgi") == " there" and event_text(chunk, "vllm") == " there"
    assert event_text('{"token": {"text": " tok", "special": false}}', "tgi") == " tok"


def test_sse_data_follows_the_event_stream_format() -> None:
    """Events end at a blank line; `data:` lines of one event join with newlines; one leading space is
    dropped; comments (`:`) and other fields are skipped; a last event without a blank line counts."""
    lines = [": ping", "event: x", 'data: {"a":', "data:1}", "", "", "data:  two spaces", "", "data: [DONE]"]
    assert list(sse_data(lines)) == ['{"a":\n1}', " two spaces", "[DONE]"]


# Event shapes as the engines write them: vLLM's `CompletionStreamResponse` and
# `ChatCompletionStreamResponse` (vllm/entrypoints/openai/protocol.py; a usage-only last chunk has no
# choices), TGI's `StreamResponse` (text-generation-inference router/src/lib.rs: `token` with `special`).
COMPLETION = '{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" Hello","logprobs":null,"finish_reason":null}]}'  # noqa: E501
CHAT = '{"id":"chat-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}]}'  # noqa: E501
USAGE = '{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3}}'  # noqa: E501
TGI = '{"index":1,"token":{"id":22557,"text":" Hi","logprob":-0.1,"special":false},"generated_text":null,"details":null}'  # noqa: E501
TGI_EOS = '{"index":2,"token":{"id":2,"text":"</s>","logprob":0.0,"special":true},"generated_text":" Hi","details":null}'  # noqa: E501


@pytest.mark.parametrize(
    ("data", "framework", "text"),
    [
        (COMPLETION, "vllm", " Hello"),
        (CHAT, "vllm", " there"),
        (USAGE, "sglang", ""),
        (TGI, "tgi", " Hi"),
        (TGI_EOS, "tgi", ""),
        ("[DONE]", "vllm", None),
    ],
)
def test_each_event_s_text(data: str, framework: str, text: str | None) -> None:
    assert event_text(data, framework) == text


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ('{"error":"Input validation error","error_type":"validation"}', "the engine ended the stream"),
        ("not json", "is not JSON"),
        ("[1]", "is not a JSON object"),
    ],
)
def test_a_bad_or_error_event_fails_the_stream(data: str, message: str) -> None:
    with pytest.raises(InvokeFailedError, match=message):
        event_text(data)


def test_the_global_address_and_its_key_come_from_the_environment() -> None:
    from gco.inference.invoke import API_KEY_ENV, GLOBAL_URL_ENV, global_address, global_base

    assert global_base({}) is None
    assert global_base({GLOBAL_URL_ENV: "http://127.0.0.1:9/"}) == "http://127.0.0.1:9"
    with pytest.raises(GcoInputError) as caught:
        global_base({GLOBAL_URL_ENV: "ftp://x"})
    assert caught.value.field == GLOBAL_URL_ENV
    both = {GLOBAL_URL_ENV: "http://127.0.0.1:9", API_KEY_ENV: " gco-k "}
    assert global_address(both) == ("http://127.0.0.1:9", {"authorization": "Bearer gco-k"})
    assert global_address({GLOBAL_URL_ENV: "http://127.0.0.1:9"}) is None  # no key: the Region's way in
    assert global_address({API_KEY_ENV: "gco-k"}) is None


def test_invoke_without_region_prefers_a_fresh_region() -> None:
    from gco.inference.invoke import serving_region
    from tests.unit.endpoints.test_observed_state import status
    from tests.unit.reconcile.records import EAST, WEST, make_record

    record = make_record(region_status={EAST: status("running", 1), WEST: status("running", 1)})
    assert serving_region(record, None) == EAST
    assert serving_region(record, None, stale={EAST}) == WEST
    assert serving_region(record, None, stale={EAST, WEST}) == EAST  # all stale: still tried, in order
    assert serving_region(record, EAST, stale={EAST}) == EAST  # --region is obeyed


def test_a_502_from_a_dead_regions_proxy_is_not_printed_as_answered_by_primary() -> None:
    from gco.cli.traffic import answered_by
    from tests.unit.reconcile.records import IMAGE, make_record

    record = make_record()
    assert answered_by(record, "primary") == f"primary ({IMAGE})"
    for code in (502, 503, 504):
        said = answered_by(record, "primary", code)
        assert "primary (" not in said
        assert said == "the Region's proxy, not an engine (primary's upstream did not answer)"
    assert answered_by(record, None, 502) == "the Region's proxy, not an engine (its upstream did not answer)"
