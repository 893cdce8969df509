"""`gco keys create|list|revoke|init-table` against the moto server: printed once, stored hashed,
bad input exit 2 with nothing written, an unknown key exit 1."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gco.cli import main
from gco.global_access import keys
from gco.local.moto.motoserver import MotoServer

TABLE = "cli-keys"


class Keys:
    def __init__(self, server: MotoServer, capsys: pytest.CaptureFixture[str]) -> None:
        self.server = server
        self.capsys = capsys

    def __call__(self, *args: str, code: int = 0) -> tuple[str, str]:
        self.capsys.readouterr()
        status = main(["keys", *args, "--endpoint-url", self.server.url, "--keys-table", TABLE])
        out, err = self.capsys.readouterr()
        assert status == code, (status, out, err)
        return out, err

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--output", "json")[0])


@pytest.fixture
def cli(moto: MotoServer, capsys: pytest.CaptureFixture[str]) -> Keys:
    run = Keys(moto, capsys)
    assert run.json("init-table") == {"table": TABLE, "created": True}
    return run


def test_create_prints_the_key_once_and_stores_its_hash(cli: Keys, dynamodb: Any) -> None:
    out, err = cli("create", "ci", "--endpoint", "smol", "--endpoint", "big")
    plaintext = out.strip()
    assert keys.KEY.fullmatch(plaintext) and "shown once" in err
    items = dynamodb.scan(TableName=TABLE)["Items"]
    assert len(items) == 1 and plaintext not in json.dumps(items)
    assert items[0]["key_hash"]["S"] == keys.key_hash(plaintext)
    listed = cli.json("list")
    assert [(k["name"], k["endpoints"], k["state"]) for k in listed] == [("ci", ["smol", "big"], "active")]
    assert "key_hash" not in listed[0] and plaintext not in json.dumps(listed)


def test_revoke_and_list(cli: Keys) -> None:
    made = cli.json("create", "nb", "--all-endpoints")
    assert made["endpoints"] == ["*"] and keys.KEY.fullmatch(made["key"])
    revoked = cli.json("revoke", made["key_id"])
    assert revoked["state"] == "revoked" and revoked["revoked_at"]
    out, _ = cli("list")
    assert made["key_id"] in out and "revoked" in out and made["key"] not in out


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["create", "x"], "--endpoint"),
        (["create", "x", "--all-endpoints", "--endpoint", "a"], "--endpoint"),
        (["create", "x", "--endpoint", "Not_A_Name"], "--endpoint"),
        (["create", "bad\nname", "--all-endpoints"], "NAME"),
        (["revoke", "nothex"], "KEY_ID"),
    ],
)
def test_bad_input_is_exit_2_and_writes_nothing(cli: Keys, args: list[str], field: str) -> None:
    _, err = cli(*args, code=2)
    assert err.startswith(f"error: {field}") and err.count("\n") == 1
    assert cli.json("list") == []


def test_revoking_an_unknown_key_is_exit_1(cli: Keys) -> None:
    _, err = cli("revoke", "0123456789ab", code=1)
    assert "no key has id 0123456789ab" in err
