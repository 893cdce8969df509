"""`gco inference invoke` through the global address when no Region serves the endpoint: the answer
is the global address's own 503, and the CLI says so, not "answered by the Region's proxy" of a
Region named `global`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gco.endpoints import EndpointStore
from gco.global_access import keys
from gco.global_access.key_store import DEFAULT_KEYS_TABLE, DynamoKeyStore, create_keys_table
from gco.inference.invoke import API_KEY_ENV, GLOBAL_URL_ENV
from gco.local.front.front import GlobalFront
from gco.local.moto.motoserver import MotoServer
from tests.functional.cli.test_inference_cli import Cli
from tests.unit.reconcile.records import EAST, IMAGE


def test_a_503_of_the_global_address_is_named_as_its_own(
    store: EndpointStore,
    moto: MotoServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    create_keys_table(store.client, DEFAULT_KEYS_TABLE)
    key_store = DynamoKeyStore(store.client, DEFAULT_KEYS_TABLE)
    plaintext, record = keys.new_key("tests", ["*"], now=datetime.now(UTC))
    key_store.put(record)
    store.create("smol", {"image": IMAGE}, [EAST])  # no Region has reported it running
    front = GlobalFront(store, key_store, {EAST: "http://127.0.0.1:9"})
    try:
        monkeypatch.setenv(GLOBAL_URL_ENV, front.url)
        monkeypatch.setenv(API_KEY_ENV, plaintext)
        out, err = Cli(moto, capsys, store.table_name)(
            "inference", "invoke", "smol", "--prompt", "hi", code=1
        )
    finally:
        front.stop()
    first = out.splitlines()[0]
    assert first.startswith("the global address 503 ") and "no Region served the request" in first, out
    assert "global (through" not in out and "the Region's proxy" not in out
    assert err == "error: smol at the global address answered 503\n"
