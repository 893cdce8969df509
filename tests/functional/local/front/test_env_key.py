"""`gco local env --with-key` exports one key per stack: the one it made before while the keys table
still accepts it, a new one once that is revoked (or gone), never one more key per call."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path

from gco import aws
from gco.global_access.key_store import DEFAULT_KEYS_TABLE, DynamoKeyStore, create_keys_table
from gco.global_access.keys import parse_bearer
from gco.local.front.process import ENV_KEY_NAME, env_key
from gco.local.moto.motoserver import MotoServer

HOME = "us-east-1"


def test_local_env_with_key_exports_the_same_key_until_it_is_revoked(
    moto: MotoServer, tmp_path: Path
) -> None:
    dynamodb = aws.client("dynamodb", region=HOME, endpoint_url=moto.url)
    create_keys_table(dynamodb, DEFAULT_KEYS_TABLE)
    keys = DynamoKeyStore(dynamodb, DEFAULT_KEYS_TABLE)

    first, made = env_key(tmp_path, moto.url, HOME, DEFAULT_KEYS_TABLE)
    assert made and stat.S_IMODE((tmp_path / ENV_KEY_NAME).stat().st_mode) == 0o600
    again, made_again = env_key(tmp_path, moto.url, HOME, DEFAULT_KEYS_TABLE)
    assert (again, made_again) == (first, False)
    assert len(keys.list()) == 1

    keys.revoke(parse_bearer(f"Bearer {first}")[0], datetime.now(UTC))
    renewed, made_renewed = env_key(tmp_path, moto.url, HOME, DEFAULT_KEYS_TABLE)
    assert made_renewed and renewed != first
    assert len(keys.list()) == 2

    (tmp_path / ENV_KEY_NAME).write_text("not a key\n")  # a kept file that is no key: a new one
    replaced, made_replaced = env_key(tmp_path, moto.url, HOME, DEFAULT_KEYS_TABLE)
    assert made_replaced and replaced not in (first, renewed)
