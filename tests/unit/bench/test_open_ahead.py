"""How many connections a load level opens before it starts (`serve.open_ahead`), the file limit injected."""

from __future__ import annotations

import resource

import pytest

from gco.bench.clients import serve


def test_a_level_opens_its_concurrency_and_a_quarter_more_within_its_requests_and_file_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(resource, "getrlimit", lambda _: (100, 200))
    assert serve.open_ahead(8, 1000) == 11
    assert serve.open_ahead(8, 5) == 5
    assert serve.open_ahead(400, 1000) == 50
    monkeypatch.setattr(resource, "getrlimit", lambda _: (resource.RLIM_INFINITY,) * 2)
    assert serve.open_ahead(400, 1000) == 501
