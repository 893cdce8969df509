"""The Regional proxy's own answers are in OpenAI's error shape: every status nginx answers itself on
the routed server has an `error_page` to a named location returning its JSON body, written so nginx
reads it as it is (single-quoted: no quote, no `$` variable), and the local stand-ins answer the same
bodies (`proxy_error_body`)."""

from __future__ import annotations

import json

import pytest

from gco.reconcile.proxy.proxy_conf import PROXY_ERRORS, nginx_conf, proxy_error_body


@pytest.mark.parametrize(("statuses", "known"), list(PROXY_ERRORS.items()))
def test_each_proxy_status_has_its_json_error_page(
    statuses: tuple[int, int], known: tuple[str, str, str]
) -> None:
    status, sent = statuses
    message, kind, code = known
    body = json.dumps({"error": {"message": message, "type": kind, "code": code}})
    assert "'" not in body and "$" not in body
    conf = nginx_conf()
    if status == 400:  # a refused path: answered where it is refused, never by an internal redirect
        assert "error_page 400" not in conf
        assert conf.count(f"return 400 '{body}';") == 3  # two refusal rules and the route check
        assert "return 400;" not in conf
        return
    redirect = f"={sent} " if sent != status else ""
    assert f"error_page {status} {redirect}@gco_{status};" in conf
    assert f"location @gco_{status} {{ default_type application/json; return {sent} '{body}'; }}" in conf


def test_the_stand_ins_answer_the_same_bodies_with_their_detail() -> None:
    assert json.loads(proxy_error_body(503, "no ready backend for smol")) == {
        "error": {
            "message": "no ready engine in this Region: no ready backend for smol",
            "type": "server_error",
            "code": "unavailable",
        }
    }
    assert json.loads(proxy_error_body(400))["error"]["code"] == "bad_path"  # a refused path
    with pytest.raises(KeyError):
        proxy_error_body(418)
