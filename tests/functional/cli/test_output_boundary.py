"""The CLI's output boundary, for real: `gco inference list` into a full device, with standard output
closed, or into a pipe whose reader left, exits 1 with one line on stderr and no traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gco.endpoints import EndpointStore
from gco.local.moto.motoserver import MotoServer
from gco.processes.interpreter import python_module
from tests.conftest import TABLE

IMAGE = "vllm/vllm-openai:v0.6.3"


@pytest.fixture
def list_argv(store: EndpointStore, moto: MotoServer) -> list[str]:
    store.create("chat", {"image": IMAGE}, ["us-east-1"])
    return python_module("gco.cli", "inference", "list", "--endpoint-url", moto.url, "--table", TABLE)


def assert_one_line(err: str, cause: str) -> None:
    assert err.count("\n") == 1 and err.startswith("error: cannot write the output: "), err
    assert cause in err and "Traceback" not in err and "Exception ignored" not in err, err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_list_into_dev_full_exits_1(list_argv: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            list_argv, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120, check=False
        )
    assert done.returncode == 1
    assert_one_line(done.stderr, "No space left on device")


def test_list_with_stdout_closed_exits_1(list_argv: list[str]) -> None:
    closed = ["sh", "-c", 'exec "$0" "$@" >&-', *list_argv]
    done = subprocess.run(closed, stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    assert done.returncode == 1
    assert_one_line(done.stderr, "standard output is closed")


def test_list_into_a_pipe_whose_reader_left_exits_1(list_argv: list[str]) -> None:
    child = subprocess.Popen(list_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # the reader leaves before anything is written
    err = child.stderr.read()
    assert child.wait(timeout=120) == 1
    assert_one_line(err, "Broken pipe")
