"""The `gco` command imports a group only when it runs: start-up stays small for every command."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from gco.cli import cli, main
from gco.cli.lazy import LazyGroup


def _probe(argv: list[str]) -> set[str]:
    """The modules a fresh interpreter holds after running `gco argv`."""
    code = (
        "import sys; from gco.cli import main; main(sys.argv[1:]); "
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('gco', 'matplotlib'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True, timeout=120
    )
    return set(done.stdout.strip().splitlines()[-1].split(","))


def test_an_inference_command_loads_neither_bench_local_matrix_nor_matplotlib() -> None:
    loaded = _probe(["inference", "list", "--help"])
    assert "gco.cli.inference" in loaded and "gco.cli.traffic" in loaded
    for absent in ("gco.cli.bench", "gco.cli.local", "gco.cli.matrix", "gco.local.stack", "matplotlib"):
        assert absent not in loaded, absent
    # nor the rollout's analysis (numpy and the statistics), loaded by `inference rollout` alone
    assert "gco.cli.rollout" not in loaded and "gco.rollout.decision" not in loaded
    assert "gco.cli.rollout" in _probe(["inference", "rollout", "--help"])


def test_bench_serve_loads_no_plotting_until_a_page_draws() -> None:
    loaded = _probe(["bench", "serve", "--help"])
    assert "gco.cli.bench" in loaded
    assert "matplotlib" not in loaded and "gco.cli.inference" not in loaded


def test_help_lists_every_group_and_the_traffic_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    listed = capsys.readouterr().out
    for group in ("bench", "inference", "local", "matrix"):
        assert f"  {group} " in listed
    assert main(["inference", "--help"]) == 0
    listed = capsys.readouterr().out
    for command in ("invoke", "canary", "promote", "rollback", "deploy", "rollout"):
        assert f"  {command} " in listed
    assert isinstance(cli, LazyGroup)


def test_each_loader_runs_once_and_an_unknown_name_is_a_usage_error() -> None:
    calls: list[str] = []

    def load() -> click.Command:
        calls.append("hello")
        return click.Command("hello", callback=lambda: click.echo("hi"))

    group = LazyGroup("top", lazy_subcommands={"hello": load})
    ctx = click.Context(group)
    assert group.list_commands(ctx) == ["hello"]
    first, second = group.get_command(ctx, "hello"), group.get_command(ctx, "hello")
    assert first is second and calls == ["hello"]
    assert group.get_command(ctx, "nope") is None


def test_a_loader_returning_another_command_is_refused() -> None:
    group = LazyGroup("top", lazy_subcommands={"one": lambda: click.Command("two")})
    with pytest.raises(TypeError, match="returned the command 'two'"):
        group.get_command(click.Context(group), "one")


def test_the_fake_engine_starts_without_pydantic() -> None:
    """It starts once per benchmark cell and per local replica: its imports are its start-up."""
    code = (
        "import sys, gco.bench.fake_engine; print(sorted(m for m in sys.modules if m.startswith('pydantic')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"
