"""What users know from kubectl and the AWS CLI: `-h` on every command with an example that names
the command, `--version`/`-V`, `-o table|json|yaml` with the same fields, and shell completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click
import pytest
import yaml

from gco import __version__
from gco.cli import cli, main
from gco.endpoints import EndpointStore
from gco.local.moto.motoserver import MotoServer
from tests.conftest import TABLE


def commands() -> list[tuple[str, ...]]:
    context = click.Context(cli)
    found: list[tuple[str, ...]] = []

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                assert sub is not None
                walk(sub, (*path, name))
        else:
            found.append(path)

    walk(cli, ())
    return found


@pytest.mark.parametrize("path", commands(), ids=" ".join)
def test_every_command_has_h_and_an_example_of_itself(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*path, "-h"]) == 0
    out = capsys.readouterr().out
    assert "-h, --help" in out
    example = out[out.index("Example:") :].splitlines()[1].strip()
    assert example.startswith(("gco " + " ".join(path), 'eval "$(gco ' + " ".join(path))), example


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([flag]) == 0
    assert capsys.readouterr().out == f"gco, version {__version__}\n"


def test_yaml_output_holds_what_json_does(
    store: EndpointStore, moto: MotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    store.create("chat", {"image": "vllm/vllm-openai:v0.6.3"}, ["us-east-1"])
    for args in (("inference", "list"), ("inference", "status", "chat")):
        shown = {}
        for output in ("json", "yaml"):
            assert main([*args, "-o", output, "--endpoint-url", moto.url, "--table", TABLE]) == 0
            text = capsys.readouterr().out
            shown[output] = json.loads(text) if output == "json" else yaml.safe_load(text)
        assert shown["json"] == shown["yaml"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_completion_scripts_and_answers(shell: str) -> None:
    env = {**os.environ, "_GCO_COMPLETE": f"{shell}_source"}
    script = subprocess.run(
        [sys.executable, "-m", "gco.cli"], check=False, env=env, capture_output=True, text=True, timeout=60
    )
    assert script.returncode == 0 and "_GCO_COMPLETE" in script.stdout, script
    if shell == "bash":
        env = {
            **os.environ,
            "_GCO_COMPLETE": "bash_complete",
            "COMP_WORDS": "gco inference de",
            "COMP_CWORD": "2",
        }
        answer = subprocess.run(
            [sys.executable, "-m", "gco.cli"],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert answer.stdout.split() == ["plain,delete", "plain,deploy"]
